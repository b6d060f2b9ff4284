//! The upstream link's unit tests: addresses, chunking, the journal, jitter, and the race
//! between a write's acknowledgement and a reconnection's replay.

use super::*;

#[test]
fn addresses() {
    assert_eq!(
        parse_address("127.0.0.1:10811/demo").unwrap(),
        ("127.0.0.1:10811".into(), "demo".into())
    );
    assert_eq!(
        parse_address("nbd://h:1/").unwrap(),
        ("h:1".into(), "".into())
    );
    assert!(parse_address("nohost").is_err());
}

#[test]
fn chunking() {
    let c: Vec<_> = UpstreamBackend::chunks(10, MAX_REQUEST * 2 + 5).collect();
    assert_eq!(
        c,
        vec![
            (10, MAX_REQUEST),
            (10 + MAX_REQUEST, MAX_REQUEST),
            (10 + 2 * MAX_REQUEST, 5)
        ]
    );
}

#[test]
fn the_journal_keeps_unflushed_writes_within_its_limit() {
    let mut j = Journal::default();
    j.push(0, 4096, Some(Bytes::from(vec![1u8; 4096])));
    j.push(4096, 4096, None);
    let upto = j.next_seq;
    j.push(8192, 4096, Some(Bytes::from(vec![2u8; 4096])));
    j.flushed(upto);
    assert_eq!(j.entries.len(), 1);
    assert_eq!(j.entries[0].offset, 8192);
    // Past the limit the oldest entries go, and a flush covering them forgets that.
    for i in 0..(JOURNAL_LIMIT / (1 << 20) + 2) as u64 {
        j.push(i << 20, 1 << 20, Some(Bytes::from(vec![0u8; 1 << 20])));
    }
    assert!(j.bytes <= JOURNAL_LIMIT);
    assert!(j.dropped_upto > 0);
    let upto = j.next_seq;
    j.flushed(upto);
    assert_eq!((j.entries.len(), j.bytes, j.dropped_upto), (0, 0, 0));
}

#[test]
fn jitter_is_between_half_and_one() {
    for _ in 0..100 {
        let j = jitter();
        assert!((0.5..1.0).contains(&j), "{j}");
    }
}

/// An upstream whose writes are durable only once flushed: a restart (a new incarnation
/// over the same `durable` pages) forgets the unflushed ones, as a node or a disk with a
/// volatile cache does.
struct Volatile {
    durable: Arc<Mutex<std::collections::HashMap<u64, Vec<u8>>>>,
    unflushed: Mutex<std::collections::HashMap<u64, Vec<u8>>>,
}

impl nbd::Export for Volatile {
    fn size(&self) -> u64 {
        1 << 20
    }

    fn capabilities(&self) -> nbd::Capabilities {
        nbd::Capabilities::default()
    }

    fn read(&self, offset: u64, len: u32) -> nbd::server::export::BoxFuture<'_, io::Result<Bytes>> {
        let page = lock(&self.unflushed)
            .get(&offset)
            .or(lock(&self.durable).get(&offset))
            .cloned()
            .unwrap_or_else(|| vec![0; len as usize]);
        Box::pin(async move { Ok(Bytes::from(page)) })
    }

    fn write(
        &self,
        offset: u64,
        data: Bytes,
        _fua: bool,
    ) -> nbd::server::export::BoxFuture<'_, io::Result<()>> {
        lock(&self.unflushed).insert(offset, data.to_vec());
        Box::pin(async { Ok(()) })
    }

    fn flush(&self) -> nbd::server::export::BoxFuture<'_, io::Result<()>> {
        let pages: Vec<_> = lock(&self.unflushed).drain().collect();
        lock(&self.durable).extend(pages);
        Box::pin(async { Ok(()) })
    }

    fn trim(&self, _offset: u64, _len: u32) -> nbd::server::export::BoxFuture<'_, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn write_zeroes(
        &self,
        _offset: u64,
        _len: u32,
        _fua: bool,
    ) -> nbd::server::export::BoxFuture<'_, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// One incarnation of the upstream on `port` (0: any); stops when the sender is used.
fn incarnation(
    rt: &Handle,
    port: u16,
    durable: &Arc<Mutex<std::collections::HashMap<u64, Vec<u8>>>>,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<io::Result<()>>,
) {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let export: Arc<dyn nbd::Export> = Arc::new(Volatile {
        durable: durable.clone(),
        unflushed: Mutex::default(),
    });
    let map: Arc<dyn nbd::ExportProvider> = Arc::new(nbd::ExportMap::new().with("vol", export));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = rt.spawn(nbd::Server::builder().build(listener, map).serve(async {
        let _ = rx.await;
    }));
    (port, tx, task)
}

/// The replay race, made deterministic by a hook between a write's acknowledgement and
/// its journaling: the upstream acknowledges a write, restarts before it is flushed
/// (forgetting it), and the link reconnects, replaying its journal, all before the
/// acknowledged write is journaled. Before, the write was journaled then anyway, the
/// next flush (on the new connection, which never saw it) succeeded and dropped it from
/// the journal: the write was lost although its flush succeeded. Now it is sent again on
/// the new connection, so the flush covers it.
#[test]
fn a_write_acknowledged_by_a_connection_lost_before_it_was_journaled_is_sent_again() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let durable: Arc<Mutex<std::collections::HashMap<u64, Vec<u8>>>> = Arc::default();
    let (port, stop, task) = incarnation(rt.handle(), 0, &durable);
    let backend = rt
        .block_on(UpstreamBackend::connect_tls(
            &format!("127.0.0.1:{port}/vol"),
            None,
            Duration::from_secs(10),
        ))
        .unwrap();
    let link = backend.link();
    backend.write_at(0, &[1u8; 4096]).unwrap();
    backend.flush().unwrap();

    // The hook runs once, on the writer's thread, after the upstream acknowledged the
    // write: the upstream restarts and the link reconnects before the write is journaled.
    let restarted = Arc::new(Mutex::new(None));
    let once = std::sync::atomic::AtomicBool::new(false);
    let (hook_link, hook_durable, hook_restarted) =
        (Arc::downgrade(&link), durable.clone(), restarted.clone());
    let handle = rt.handle().clone();
    let stop = Mutex::new(Some((stop, task)));
    *lock(&link.after_ack) = Some(Box::new(move || {
        if once.swap(true, Ordering::SeqCst) {
            return;
        }
        let (stop, task) = lock(&stop).take().unwrap();
        let _ = stop.send(());
        handle.block_on(task).unwrap().unwrap();
        // The restart: a new incarnation on the same port over the durable pages only.
        *lock(&hook_restarted) = Some(incarnation(&handle, port, &hook_durable).1);
        let link = hook_link.upgrade().unwrap();
        let t0 = Instant::now();
        while link.status().reconnects == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20), "no reconnection");
            std::thread::sleep(Duration::from_millis(5));
        }
    }));
    backend.write_at(4096, &[2u8; 4096]).unwrap();
    assert_eq!(link.status().reconnects, 1);
    backend.flush().unwrap();
    assert_eq!(
        lock(&durable).get(&4096).map(|p| p[0]),
        Some(2),
        "a write whose flush succeeded is not on the upstream"
    );
    assert_eq!(lock(&durable).get(&0).map(|p| p[0]), Some(1));
    drop(lock(&restarted).take());
    drop(backend);
}
