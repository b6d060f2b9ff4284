//! The controller's state in etcd, and leader election among controller replicas.
//!
//! `--store etcd://HOST:PORT[/PREFIX]` keeps what [`crate::store::SqliteStore`] keeps
//! (tenants, nodes, the `control` state, the last plan, the history of decisions) under
//! `PREFIX` (default `/lachesis`) in an etcd v3 cluster, behind the same
//! [`Store`] trait:
//!
//! | key | value |
//! |---|---|
//! | `PREFIX/kv/NAME` | the value of `Store::get(NAME)` |
//! | `PREFIX/history/all/SEQ` | one [`HistoryEntry`] (JSON), `SEQ` 16 hex digits, rising |
//! | `PREFIX/history/t/TENANT/SEQ` | the same entry, indexed by tenant |
//! | `PREFIX/leader` | the leading replica (`{"id","api"}`), bound to its lease |
//!
//! **Client.** This module talks to etcd's v3 JSON gateway (`/v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant`, `/v3/lease/keepalive`, `/v3/lease/revoke`; keys and values base64)
//! over the blocking `ureq` client the crate already uses for nodes, rather than the
//! `etcd-client` crate: that crate generates its gRPC code with `tonic-build`, which needs
//! `protoc` at build time (not on a fresh CI machine) and adds a gRPC stack to the build,
//! while the controller's needs (a few keys, batches, one lease) fit a handful of JSON
//! calls. Every batch ([`Store::put`], [`Store::append_history`]) is one etcd transaction,
//! so it is all-or-nothing as in SQLite.
//!
//! **Fencing.** Only the leader writes: while a replica leads, each of its transactions
//! also compares `PREFIX/leader` with the value it put there, so a replica that has lost
//! its lease (paused, partitioned) cannot overwrite what the new leader wrote; a replica
//! that does not lead gets [`StoreError::Backend`] from every write.
//!
//! **Election** ([`Election`]). Each replica holds a lease of TTL
//! `max(ceil(interval), 2)` s (etcd's minimum is 2 s with its default timing) and keeps it
//! alive every TTL/4. A replica becomes leader by creating `PREFIX/leader` bound to its
//! lease in a transaction that succeeds only if the key does not exist. When the leader
//! dies its keepalives stop, etcd deletes the key when the lease expires (at most one TTL
//! later), and a standby, which retries every TTL/4, leads within TTL + TTL/4 of the last
//! keepalive: within two intervals for intervals of 2 s or more. A replica that stops
//! cleanly revokes its lease, handing over at once. The service loads its whole state
//! from the store when it starts leading ([`crate::service::Service`]), so nothing the old
//! leader committed is lost.

use crate::store::{HistoryEntry, Store, StoreError};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A minimal etcd v3 client over the JSON gateway.
#[derive(Clone)]
pub struct EtcdClient {
    base: String,
    agent: ureq::Agent,
}

fn b64(s: &[u8]) -> String {
    B64.encode(s)
}

fn unb64(v: &Value) -> Vec<u8> {
    v.as_str()
        .and_then(|s| B64.decode(s).ok())
        .unwrap_or_default()
}

/// An int64 as the gateway writes it (a string) or a number.
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// The first key after every key that starts with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// One key-value pair read back.
#[derive(Clone, Debug)]
pub struct Kv {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

impl EtcdClient {
    /// A client of the gateway at `http://HOST:PORT`.
    pub fn new(base: &str) -> Self {
        EtcdClient {
            base: base.trim_end_matches('/').to_string(),
            agent: ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(2))
                .timeout(Duration::from_secs(5))
                .build(),
        }
    }

    /// `POST /v3/{path}` with a JSON body.
    pub fn call(&self, path: &str, body: Value) -> Result<Value, StoreError> {
        let url = format!("{}/v3/{path}", self.base);
        match self.agent.post(&url).send_json(body) {
            Ok(r) => {
                let text = r
                    .into_string()
                    .map_err(|e| StoreError::Backend(format!("etcd {url}: reading: {e}")))?;
                // A streaming endpoint (keepalive) answers `{"result": ...}` objects.
                let v: Value = serde_json::from_str(text.trim()).map_err(|e| {
                    StoreError::Backend(format!("etcd {url}: answer is not JSON ({e}): {text}"))
                })?;
                if let Some(err) = v.get("error") {
                    return Err(StoreError::Backend(format!("etcd {url}: {err}")));
                }
                Ok(v.get("result").cloned().unwrap_or(v))
            }
            Err(ureq::Error::Status(code, r)) => {
                let t = r.into_string().unwrap_or_default();
                Err(StoreError::Backend(format!("etcd {url}: HTTP {code}: {t}")))
            }
            Err(e) => Err(StoreError::Backend(format!("etcd {url}: {e}"))),
        }
    }

    /// Keys in `[key, range_end)` (or exactly `key`), up to `limit` (0: all), sorted by key
    /// (descending if `desc`).
    pub fn range(
        &self,
        key: &[u8],
        range_end: Option<&[u8]>,
        limit: usize,
        desc: bool,
    ) -> Result<Vec<Kv>, StoreError> {
        let mut body = json!({"key": b64(key), "limit": limit,
            "sort_order": if desc { "DESCEND" } else { "ASCEND" }, "sort_target": "KEY"});
        if let Some(e) = range_end {
            body["range_end"] = Value::String(b64(e));
        }
        let v = self.call("kv/range", body)?;
        Ok(kvs(&v))
    }

    /// A transaction; `Ok(succeeded, responses)`.
    pub fn txn(
        &self,
        compare: Vec<Value>,
        success: Vec<Value>,
        failure: Vec<Value>,
    ) -> Result<(bool, Vec<Value>), StoreError> {
        let v = self.call(
            "kv/txn",
            json!({"compare": compare, "success": success, "failure": failure}),
        )?;
        let ok = v.get("succeeded").and_then(Value::as_bool).unwrap_or(false);
        let resp = v
            .get("responses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Ok((ok, resp))
    }

    /// Grants a lease of `ttl` seconds; its id.
    pub fn grant(&self, ttl: u64) -> Result<i64, StoreError> {
        let v = self.call("lease/grant", json!({"TTL": ttl.to_string(), "ID": "0"}))?;
        match int(&v["ID"]) {
            0 => Err(StoreError::Backend(format!(
                "etcd lease grant: no ID in {v}"
            ))),
            id => Ok(id),
        }
    }

    /// Renews a lease; its remaining TTL (0 or less: it has expired).
    pub fn keepalive(&self, id: i64) -> Result<i64, StoreError> {
        let v = self.call("lease/keepalive", json!({"ID": id.to_string()}))?;
        Ok(int(&v["TTL"]))
    }

    /// Revokes a lease (deleting the keys bound to it).
    pub fn revoke(&self, id: i64) -> Result<(), StoreError> {
        self.call("lease/revoke", json!({"ID": id.to_string()}))
            .map(|_| ())
    }
}

fn kvs(v: &Value) -> Vec<Kv> {
    v.get("kvs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|kv| Kv {
                    key: unb64(&kv["key"]),
                    value: unb64(&kv["value"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn put_op(key: &[u8], value: &[u8], lease: Option<i64>) -> Value {
    let mut p = json!({"key": b64(key), "value": b64(value)});
    if let Some(l) = lease {
        p["lease"] = Value::String(l.to_string());
    }
    json!({ "request_put": p })
}

fn delete_op(key: &[u8]) -> Value {
    json!({"request_delete_range": {"key": b64(key)}})
}

/// Where `--store etcd://HOST:PORT[/PREFIX]` points: the gateway's base URL and the prefix.
pub fn parse_url(spec: &str) -> Result<(String, String), StoreError> {
    let bad = |why: &str| {
        StoreError::Backend(format!(
            "--store `{spec}`: {why} (expected etcd://HOST:PORT[/PREFIX])"
        ))
    };
    let rest = spec
        .strip_prefix("etcd://")
        .ok_or_else(|| bad("not an etcd:// URL"))?;
    let (hostport, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/lachesis"),
    };
    let (host, port) = hostport.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    if host.is_empty() {
        return Err(bad("no host"));
    }
    port.parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| bad(&format!("port `{port}` is not a number from 1 to 65535")))?;
    let prefix = prefix.trim_end_matches('/');
    let prefix = if prefix.is_empty() {
        "/lachesis"
    } else {
        prefix
    };
    Ok((format!("http://{hostport}"), prefix.to_string()))
}

/// The controller's state in etcd (see the module doc).
pub struct EtcdStore {
    client: EtcdClient,
    prefix: String,
    url: String,
    /// While this replica leads: the leader key's value it put, compared by every write.
    fence: Mutex<Option<Vec<u8>>>,
    seq: AtomicU64,
}

impl EtcdStore {
    /// Connects to `etcd://HOST:PORT[/PREFIX]`, checking that etcd answers.
    pub fn connect(spec: &str) -> Result<Arc<EtcdStore>, StoreError> {
        let (base, prefix) = parse_url(spec)?;
        let client = EtcdClient::new(&base);
        let s = EtcdStore {
            client,
            prefix,
            url: spec.to_string(),
            fence: Mutex::new(None),
            seq: AtomicU64::new(0),
        };
        let last = s
            .client
            .range(
                s.hkey_all_prefix().as_bytes(),
                Some(&prefix_end(s.hkey_all_prefix().as_bytes())),
                1,
                true,
            )
            .map_err(|e| {
                StoreError::Backend(format!("--store {spec}: etcd does not answer: {e}"))
            })?;
        let next = last
            .first()
            .and_then(|kv| {
                let k = String::from_utf8_lossy(&kv.key);
                u64::from_str_radix(k.rsplit('/').next()?, 16).ok()
            })
            .map_or(0, |n| n + 1);
        s.seq.store(next, Ordering::SeqCst);
        Ok(Arc::new(s))
    }

    /// The client (shared with the election).
    pub fn client(&self) -> &EtcdClient {
        &self.client
    }

    /// The key replicas compete for.
    pub fn leader_key(&self) -> String {
        format!("{}/leader", self.prefix)
    }

    fn kv_key(&self, k: &str) -> String {
        format!("{}/kv/{k}", self.prefix)
    }

    fn hkey_all_prefix(&self) -> String {
        format!("{}/history/all/", self.prefix)
    }

    fn hkey_tenant_prefix(&self, t: &str) -> String {
        format!("{}/history/t/{t}/", self.prefix)
    }

    fn set_fence(&self, v: Option<Vec<u8>>) {
        *self.fence.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }

    fn fenced(&self, ops: Vec<Value>) -> Result<(), StoreError> {
        let fence = self
            .fence
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                StoreError::Backend(format!(
                    "{}: this replica does not lead; only the leader writes",
                    self.url
                ))
            })?;
        let cmp = json!({"target": "VALUE", "result": "EQUAL",
            "key": b64(self.leader_key().as_bytes()), "value": b64(&fence)});
        let (ok, _) = self.client.txn(vec![cmp], ops, vec![])?;
        if !ok {
            self.set_fence(None);
            return Err(StoreError::Backend(format!(
                "{}: leadership lost (the leader key changed); nothing written",
                self.url
            )));
        }
        Ok(())
    }
}

impl Store for EtcdStore {
    fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let r = self
            .client
            .range(self.kv_key(key).as_bytes(), None, 1, false)?;
        Ok(r.into_iter()
            .next()
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
    }

    fn put(&self, batch: &[(&str, Option<String>)]) -> Result<(), StoreError> {
        let ops = batch
            .iter()
            .map(|(k, v)| {
                let key = self.kv_key(k);
                match v {
                    Some(v) => put_op(key.as_bytes(), v.as_bytes(), None),
                    None => delete_op(key.as_bytes()),
                }
            })
            .collect();
        self.fenced(ops)
    }

    fn append_history(&self, entries: &[HistoryEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        // Read the last sequence number back: another replica may have led since.
        let p = self.hkey_all_prefix();
        let first = self
            .client
            .range(p.as_bytes(), Some(&prefix_end(p.as_bytes())), 1, true)?
            .first()
            .and_then(|kv| {
                let k = String::from_utf8_lossy(&kv.key);
                u64::from_str_radix(k.rsplit('/').next()?, 16).ok()
            })
            .map_or(0, |n| n + 1);
        let mut ops = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let seq = format!("{:016x}", first + i as u64);
            let v = serde_json::to_string(e).map_err(|e| StoreError::Backend(e.to_string()))?;
            ops.push(put_op(
                format!("{}{seq}", self.hkey_all_prefix()).as_bytes(),
                v.as_bytes(),
                None,
            ));
            ops.push(put_op(
                format!("{}{seq}", self.hkey_tenant_prefix(&e.tenant)).as_bytes(),
                v.as_bytes(),
                None,
            ));
        }
        self.fenced(ops)?;
        self.seq
            .store(first + entries.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    fn history(&self, tenant: Option<&str>, limit: usize) -> Result<Vec<HistoryEntry>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let p = match tenant {
            Some(t) => self.hkey_tenant_prefix(t),
            None => self.hkey_all_prefix(),
        };
        let r = self
            .client
            .range(p.as_bytes(), Some(&prefix_end(p.as_bytes())), limit, true)?;
        let mut out = Vec::with_capacity(r.len());
        for kv in r.into_iter().rev() {
            let e: HistoryEntry =
                serde_json::from_slice(&kv.value).map_err(|e| StoreError::Corrupt {
                    key: String::from_utf8_lossy(&kv.key).into_owned(),
                    msg: e.to_string(),
                })?;
            out.push(e);
        }
        Ok(out)
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

/// Who leads, as `/v1/status` shows it: the contract's type.
pub use api::controller::LeaderView;

/// One replica's side of the election (see the module doc).
pub struct Election {
    store: Arc<EtcdStore>,
    id: String,
    ttl: u64,
    view: Mutex<LeaderView>,
    lease: Mutex<Option<i64>>,
}

impl Election {
    /// A replica called `id` competing through `store`'s leader key, with a lease lasting
    /// `max(ceil(interval), 2)` seconds.
    pub fn new(store: Arc<EtcdStore>, id: &str, interval: Duration) -> Arc<Election> {
        let ttl = (interval.as_secs_f64().ceil() as u64).max(2);
        Arc::new(Election {
            store,
            id: id.to_string(),
            ttl,
            view: Mutex::new(LeaderView {
                me: id.to_string(),
                ..Default::default()
            }),
            lease: Mutex::new(None),
        })
    }

    /// How often [`Election::step`] runs: a quarter of the lease.
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(self.ttl as f64 / 4.0)
    }

    /// The lease's TTL (s).
    pub fn ttl(&self) -> u64 {
        self.ttl
    }

    /// Who leads as last seen.
    pub fn view(&self) -> LeaderView {
        self.view.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether this replica leads.
    pub fn leading(&self) -> bool {
        self.view().leading
    }

    fn set_view(&self, v: LeaderView) {
        let mut g = self.view.lock().unwrap_or_else(|p| p.into_inner());
        if g.leading != v.leading {
            if v.leading {
                tracing::info!(replica = %self.id, "leading (holds the etcd lease)");
            } else {
                tracing::warn!(replica = %self.id, leader = ?v.leader, "not leading");
            }
        }
        *g = v;
    }

    fn lose(&self, why: &str) {
        tracing::warn!(replica = %self.id, %why, "lost the lease");
        self.store.set_fence(None);
        *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.set_view(LeaderView {
            me: self.id.clone(),
            ..Default::default()
        });
    }

    /// One round (blocking): keep the lease alive, and lead if nobody does. `api` is this
    /// replica's API address, published in the leader key.
    pub fn step(&self, api: &str) -> Result<(), StoreError> {
        let c = self.store.client();
        let lease = *self.lease.lock().unwrap_or_else(|p| p.into_inner());
        let lease = match lease {
            Some(l) => {
                if c.keepalive(l)? <= 0 {
                    self.lose("the lease expired");
                    return Ok(());
                }
                l
            }
            None => {
                let l = c.grant(self.ttl)?;
                *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = Some(l);
                l
            }
        };
        let key = self.store.leader_key();
        let me =
            serde_json::to_vec(&json!({"id": self.id, "api": api})).expect("plain data serialises");
        let (won, resp) = c.txn(
            vec![json!({"target": "CREATE", "result": "EQUAL",
                "key": b64(key.as_bytes()), "create_revision": "0"})],
            vec![put_op(key.as_bytes(), &me, Some(lease))],
            vec![json!({"request_range": {"key": b64(key.as_bytes())}})],
        )?;
        let holder: Vec<u8> = if won {
            me.clone()
        } else {
            resp.first()
                .map(|r| kvs(&r["response_range"]))
                .and_then(|k| k.into_iter().next())
                .map(|kv| kv.value)
                .unwrap_or_default()
        };
        let leading = holder == me;
        if leading {
            self.store.set_fence(Some(me));
        } else {
            self.store.set_fence(None);
        }
        let h: Value = serde_json::from_slice(&holder).unwrap_or(Value::Null);
        self.set_view(LeaderView {
            me: self.id.clone(),
            leading,
            leader: h["id"].as_str().map(str::to_string),
            leader_api: h["api"].as_str().map(str::to_string),
        });
        Ok(())
    }

    /// Steps down: revokes the lease so a standby leads at once.
    pub fn resign(&self) {
        let lease = self.lease.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.store.set_fence(None);
        if let Some(l) = lease {
            if let Err(e) = self.store.client().revoke(l) {
                tracing::warn!(%e, "revoking the lease");
            }
        }
        self.set_view(LeaderView {
            me: self.id.clone(),
            ..Default::default()
        });
    }

    /// Runs [`Election::step`] every [`Election::period`] until `stop`, then resigns.
    pub async fn run(self: Arc<Self>, api: String, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let e = self.clone();
            let a = api.clone();
            match tokio::task::spawn_blocking(move || e.step(&a)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    // etcd unreachable: we cannot know we still hold the lease.
                    if self.leading() {
                        self.lose(&err.to_string());
                    } else {
                        tracing::warn!(%err, "election round failed");
                    }
                }
                Err(err) => tracing::error!(%err, "election round panicked"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.period()) => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                let e = self.clone();
                let _ = tokio::task::spawn_blocking(move || e.resign()).await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_is_wrong() {
        assert_eq!(
            parse_url("etcd://127.0.0.1:2379").unwrap(),
            ("http://127.0.0.1:2379".into(), "/lachesis".into())
        );
        assert_eq!(
            parse_url("etcd://h:1/x/y/").unwrap(),
            ("http://h:1".into(), "/x/y".into())
        );
        for (bad, why) in [
            ("etcd://", "no port"),
            ("etcd://:2379", "no host"),
            ("etcd://h:abc", "port `abc`"),
            ("etcd://h:0", "port `0`"),
            ("http://h:1", "not an etcd:// URL"),
        ] {
            let e = parse_url(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn prefix_ends_bound_the_prefix() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
