//! Recovery files: dirty blocks a node could not write back, kept on local disk so that
//! nothing acknowledged is dropped silently when it stops ([`CacheNode::dirty_data`]
//! collects them, [`write()`] saves them, [`read()`] loads them for the next start to replay
//! through the cache).
//!
//! Format (all integers big-endian): the magic `LACHREC1`, then one record per block: the
//! export name's length (u16) and bytes, the offset (u64), the data's length (u32) and
//! bytes. A file is written to a temporary name, synced and renamed, so a crash leaves
//! either the old file or the new one. A file that does not parse is an error naming the
//! file and the byte where it stopped making sense.
//!
//! [`CacheNode::dirty_data`]: crate::CacheNode::dirty_data

use std::io::{self, Write};
use std::path::Path;

const MAGIC: &[u8; 8] = b"LACHREC1";

/// One dirty block: which export, where, and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirtyBlock {
    /// The export's name.
    pub export: String,
    /// Byte offset in the export.
    pub offset: u64,
    /// The block's bytes (shorter than a block only at the export's end).
    pub data: Vec<u8>,
}

/// Save `blocks` to `path` (atomically: temporary file, sync, rename).
pub fn write(path: &Path, blocks: &[DirtyBlock]) -> io::Result<()> {
    let mut buf = MAGIC.to_vec();
    for b in blocks {
        let name = b.export.as_bytes();
        let name_len = u16::try_from(name.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "export name too long"))?;
        let data_len = u32::try_from(b.data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block too large"))?;
        buf.extend_from_slice(&name_len.to_be_bytes());
        buf.extend_from_slice(name);
        buf.extend_from_slice(&b.offset.to_be_bytes());
        buf.extend_from_slice(&data_len.to_be_bytes());
        buf.extend_from_slice(&b.data);
    }
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&buf)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Load the blocks saved in `path`.
pub fn read(path: &Path) -> io::Result<Vec<DirtyBlock>> {
    let buf = std::fs::read(path)?;
    let bad = |at: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: byte {at}: {what}", path.display()),
        )
    };
    if buf.get(..8) != Some(&MAGIC[..]) {
        return Err(bad(0, "not a Lachesis recovery file (magic LACHREC1)"));
    }
    let mut at = 8;
    let mut out = Vec::new();
    while at < buf.len() {
        let n = u16::from_be_bytes(take(&buf, &mut at, "name length", bad)?) as usize;
        let p = at;
        let name = take_n(&buf, &mut at, n, "export name", bad)?;
        let export = std::str::from_utf8(name)
            .map_err(|_| bad(p, "export name is not UTF-8"))?
            .to_string();
        let offset = u64::from_be_bytes(take(&buf, &mut at, "offset", bad)?);
        let len = u32::from_be_bytes(take(&buf, &mut at, "data length", bad)?) as usize;
        let data = take_n(&buf, &mut at, len, "data", bad)?.to_vec();
        out.push(DirtyBlock {
            export,
            offset,
            data,
        });
    }
    Ok(out)
}

fn take_n<'a>(
    buf: &'a [u8],
    at: &mut usize,
    n: usize,
    what: &str,
    bad: impl Fn(usize, &str) -> io::Error,
) -> io::Result<&'a [u8]> {
    let s = buf
        .get(*at..*at + n)
        .ok_or_else(|| bad(*at, &format!("truncated {what}")))?;
    *at += n;
    Ok(s)
}

fn take<const N: usize>(
    buf: &[u8],
    at: &mut usize,
    what: &str,
    bad: impl Fn(usize, &str) -> io::Error,
) -> io::Result<[u8; N]> {
    let s = take_n(buf, at, N, what, bad)?;
    Ok(s.try_into().expect("N bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recovery.bin");
        let blocks = vec![
            DirtyBlock {
                export: "demo".into(),
                offset: 8192,
                data: vec![7; 4096],
            },
            DirtyBlock {
                export: "ü".into(),
                offset: 0,
                data: vec![1, 2, 3],
            },
        ];
        write(&p, &blocks).unwrap();
        assert_eq!(read(&p).unwrap(), blocks);
        write(&p, &[]).unwrap();
        assert!(read(&p).unwrap().is_empty());
        std::fs::write(&p, b"LACHREC1\x00\x04dem").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("byte 10: truncated export name"), "{e}");
        std::fs::write(&p, b"nonsense").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("magic"));
    }
}
