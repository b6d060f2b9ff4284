//! The one trace reader of the load generators: a trace file (any format `trace::open`
//! detects, such as the shared CloudPhysics trace) read whole into block requests on a
//! volume of a given size: offsets wrapped into the volume and aligned down to 4 KiB,
//! lengths rounded up to whole 4 KiB blocks, at least one and at most 16 (64 KiB), cut at
//! the volume's end. Reads and writes are kept; trims and flushes are left out (the
//! shared trace has none). A bad record is an error naming the file and line
//! (`trace::TraceError`).

use std::path::Path;
use std::sync::Arc;
use trace::{Op, Request, TraceError};

/// Bytes of a block.
const BLOCK: u64 = 4096;

/// The longest request kept, in blocks.
const MAX_BLOCKS: u64 = 16;

/// Reads `path` into block requests on a volume of `volume` bytes (at least one block).
pub fn read(path: &Path, volume: u64) -> Result<Arc<Vec<Request>>, TraceError> {
    let volume = volume.max(BLOCK) / BLOCK * BLOCK;
    let mut out = Vec::new();
    for r in trace::open(path, None)? {
        let r = r?;
        if !matches!(r.op, Op::Read | Op::Write) {
            continue;
        }
        out.push(on_volume(r, volume));
    }
    if out.is_empty() {
        return Err(TraceError::Usage(format!(
            "{}: no reads or writes",
            path.display()
        )));
    }
    Ok(Arc::new(out))
}

/// `r` placed on a volume of `volume` bytes (a multiple of 4 KiB), as the module says.
fn on_volume(mut r: Request, volume: u64) -> Request {
    let offset = (r.offset % volume) / BLOCK * BLOCK;
    let blocks = u64::from(r.len).div_ceil(BLOCK).clamp(1, MAX_BLOCKS);
    r.offset = offset;
    r.len = (blocks * BLOCK).min(volume - offset) as u32;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_wrapped_aligned_and_cut_to_whole_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        std::fs::write(
            &p,
            "version,time,op,size,lbn\n1,1,28,512,9\n1,2,2a,1000000,0\n1,3,28,8192,2097144\n",
        )
        .unwrap();
        // A volume of 1 MiB: sector 9 is byte 4608 (block 1); sector 2097144 is byte
        // 1073737728, 1 MiB - 4096 into the volume, where 8 KiB is cut to one block.
        let t = read(&p, 1 << 20).unwrap();
        let got: Vec<(Op, u64, u32)> = t.iter().map(|r| (r.op, r.offset, r.len)).collect();
        assert_eq!(
            got,
            [
                (Op::Read, 4096, 4096),
                (Op::Write, 0, 65536),
                (Op::Read, (1 << 20) - 4096, 4096)
            ]
        );
    }

    #[test]
    fn a_bad_line_is_named_and_an_empty_trace_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, "version,time,op,size,lbn\n1,1,28,512,9\n1,x,28,512,9\n").unwrap();
        let e = read(&p, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("bad.csv") && e.contains('3'), "{e}");
        let p = dir.path().join("empty.csv");
        std::fs::write(&p, "version,time,op,size,lbn\n").unwrap();
        assert!(read(&p, 1 << 20).is_err());
    }
}
