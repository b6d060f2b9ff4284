//! The operator's page served at `/`: one self-contained HTML document (no external
//! assets) that polls the JSON API every two seconds and draws the node's caches (size,
//! occupancy, hit ratio, dirty blocks, policies), each cache's live miss-ratio curve (miss
//! ratio falling with size, sizes in binary units, "no data yet" before any access) with its
//! current size marked, and the tenants' read and write IOPS, throughput (MiB/s), hit
//! ratio and latency percentiles.
//!
//! The page itself loads without credentials, but the data it polls needs the API token
//! (see [`crate::auth`]). The operator opens `http://NODE_API/#token=TOKEN` (the token is
//! in `DATA_DIR/api.token`); the page moves the token from the fragment (which browsers
//! never send to the server) into `sessionStorage`, removes it from the address bar and
//! sends it as `Authorization: Bearer` with every request. Without a fragment it asks
//! once with a prompt; a 401 clears the stored token so the next poll asks again.

/// The page.
pub const PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lachesis node</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:0 0 .3em} h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff} td,th{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right}
th{background:#f0f0f0} td:first-child,th:first-child{text-align:left}
.bar{display:inline-block;height:.7em;background:#4a7;vertical-align:middle}
.curves{display:flex;flex-wrap:wrap;gap:1em} .curve{background:#fff;border:1px solid #ddd;padding:.5em}
#err{color:#b00} .nodata{color:#888;padding:2em 1em}
</style></head><body>
<h1>Lachesis cache node</h1><div id="node"></div><div id="err"></div>
<h2>Caches</h2><table id="caches"></table>
<h2>Miss-ratio curves (online SHARDS: miss ratio against cache size; the dot is the current size)</h2><div class="curves" id="curves"></div>
<h2>Tenants</h2><table id="tenants"></table>
<script>
const fmt=(n)=>n>=1e9?(n/1e9).toFixed(2)+' G':n>=1e6?(n/1e6).toFixed(2)+' M':n>=1e3?(n/1e3).toFixed(1)+' k':(+n).toFixed(0);
const fmtB=(n)=>n>=2**30?(n/2**30).toFixed(2)+' GiB':n>=2**20?(n/2**20).toFixed(1)+' MiB':n>=1024?(n/1024).toFixed(0)+' KiB':(+n).toFixed(0)+' B';
const esc=(s)=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
let last={};
function row(cells,th){return '<tr>'+cells.map(c=>th?'<th>'+c+'</th>':'<td>'+c+'</td>').join('')+'</tr>'}
function svg(points,size,bs){
  const W=280,H=150,P=28; if(!points.length) return '<div class="nodata">no data yet (no access)</div>';
  const xmax=points[points.length-1].cache_size||1;
  const x=s=>P+(W-P-6)*s/xmax, y=m=>6+(H-P-6)*(1-m);
  const d=points.map((p,i)=>(i?'L':'M')+x(p.cache_size).toFixed(1)+','+y(p.miss_ratio).toFixed(1)).join('');
  let cur=points.find(p=>p.cache_size>=size)||points[points.length-1];
  return `<svg width="${W}" height="${H}"><rect x="${P}" y="6" width="${W-P-6}" height="${H-P-6}" fill="none" stroke="#ccc"/>
  <path d="${d}" fill="none" stroke="#36c" stroke-width="2"/><circle cx="${x(size)}" cy="${y(cur.miss_ratio)}" r="4" fill="#c33"/>
  <text x="2" y="12" font-size="10">1.0</text><text x="2" y="${H-P}" font-size="10">0</text>
  <text x="${P}" y="${H-10}" font-size="10">0</text><text x="${W-6}" y="${H-10}" font-size="10" text-anchor="end">${fmtB(xmax*bs)}</text>
  <text x="${(W+P)/2}" y="${H-10}" font-size="10" fill="#666" text-anchor="middle">cache size</text>
  <text x="${P+4}" y="16" font-size="10" fill="#666">miss ratio</text></svg>`;
}
function token(){
  const m=location.hash.match(/token=([^&]+)/);
  if(m){sessionStorage.setItem('lachesis-token',decodeURIComponent(m[1]));history.replaceState(null,'',location.pathname);}
  let t=sessionStorage.getItem('lachesis-token');
  if(!t){t=(prompt('API token (the node\'s api.token file)')||'').trim(); if(t) sessionStorage.setItem('lachesis-token',t);}
  return t||'';
}
async function api(u){
  const r=await fetch(u,{headers:{'Authorization':'Bearer '+token()}});
  if(r.status===401){sessionStorage.removeItem('lachesis-token'); throw new Error((await r.json()).error);}
  return r;
}
async function tick(){
  try{
    const [node,caches,tenants]=await Promise.all(['/v1/node','/v1/caches','/v1/tenants'].map(u=>api(u).then(r=>r.json())));
    document.getElementById('err').textContent='';
    document.getElementById('node').textContent=`level ${node.level} · block ${node.block_size} B · ${fmt(node.allocated_blocks)} of ${fmt(node.total_blocks)} blocks allocated · up ${node.uptime_seconds.toFixed(0)} s`;
    let h=row(['cache','size','resident','dirty','hit ratio','eviction','admission','write policy','evictions','write-backs'],true);
    for(const c of caches){const s=c.stats;const occ=s.capacity?s.resident/s.capacity:0;
      h+=row([esc(c.name)+' #'+c.id,fmtB(c.size_bytes),`<span class="bar" style="width:${(60*occ).toFixed(0)}px"></span> ${(100*occ).toFixed(0)}%`,fmt(s.dirty),(100*c.hit_ratio).toFixed(1)+'%',esc(s.eviction),esc(s.admission),esc(s.write_policy),fmt(s.evictions),fmt(s.writebacks)]);}
    document.getElementById('caches').innerHTML=h;
    let cv='';
    for(const c of caches){
      try{const r=await api(`/v1/caches/${encodeURIComponent(c.name)}/curve?points=40`); if(!r.ok) continue; const j=await r.json();
        cv+=`<div class="curve"><b>${esc(c.name)}</b><br>${svg(j.points,c.stats.capacity,node.block_size)}</div>`;}catch(e){}
    }
    document.getElementById('curves').innerHTML=cv||'(no profiled cache)';
    const now=performance.now();
    let t=row(['tenant','export','client','read IOPS','write IOPS','read MiB/s','write MiB/s','hit ratio','read p50 µs','read p99 µs','write p99 µs'],true);
    for(const x of tenants){const k=x.export+'|'+x.client, p=last[k], dt=p?(now-p.t)/1000:0;
      const rate=(a,b)=>p&&dt>0?(a-b)/dt:0;
      t+=row([esc(x.tenant),esc(x.export),esc(x.client),fmt(rate(x.reads,p?p.reads:0)),fmt(rate(x.writes,p?p.writes:0)),(rate(x.read_bytes,p?p.read_bytes:0)/2**20).toFixed(1),(rate(x.write_bytes,p?p.write_bytes:0)/2**20).toFixed(1),(100*x.hit_ratio).toFixed(1)+'%',x.latency.read.p50_us,x.latency.read.p99_us,x.latency.write.p99_us]);
      last[k]={t:now,reads:x.reads,writes:x.writes,read_bytes:x.read_bytes,write_bytes:x.write_bytes};}
    document.getElementById('tenants').innerHTML=t;
  }catch(e){document.getElementById('err').textContent='API unreachable: '+e;}
}
tick(); setInterval(tick,2000);
</script></body></html>
"##;
