//! MSR Cambridge block traces (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//! `Timestamp` is a Windows FILETIME (100 ns ticks), `Type` is `Read` or `Write`, `Offset`
//! and `Size` are bytes. Each host becomes a tenant (ids in first-seen order) and
//! `DiskNumber` its volume.

use super::text::{fields, len32, uint, LineParser, NameIds};
use crate::{Op, Request};

/// Parser state: host name ids.
#[derive(Default)]
pub struct Msr {
    hosts: NameIds,
}

impl LineParser for Msr {
    fn parse(&mut self, line: &str) -> Result<Option<Request>, String> {
        if line.starts_with("Timestamp") {
            return Ok(None);
        }
        let mut f = fields(line, ',');
        let mut next = |name: &str| f.next().ok_or_else(|| format!("missing field `{name}`"));
        let ticks = uint(next("Timestamp")?, "Timestamp")?;
        let host = next("Hostname")?.trim().to_string();
        let disk = uint(next("DiskNumber")?, "DiskNumber")?;
        let op = match next("Type")?.trim() {
            t if t.eq_ignore_ascii_case("read") => Op::Read,
            t if t.eq_ignore_ascii_case("write") => Op::Write,
            t => {
                return Err(format!(
                    "field `Type`: unknown op `{t}` (expected Read or Write)"
                ))
            }
        };
        let offset = uint(next("Offset")?, "Offset")?;
        let size = uint(next("Size")?, "Size")?;
        Ok(Some(Request {
            time_us: ticks / 10,
            tenant: self.hosts.id(&host),
            volume: u32::try_from(disk)
                .map_err(|_| format!("field `DiskNumber`: {disk} is too large"))?,
            op,
            offset,
            len: len32(size, "Size")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_msr_lines() {
        let mut p = Msr::default();
        let r = p
            .parse("128166372003061629,wdev,0,Write,3216090624,4096,1543")
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.op, r.offset, r.len, r.volume, r.tenant),
            (Op::Write, 3216090624, 4096, 0, 0)
        );
        assert_eq!(r.time_us, 12816637200306162);
        let s = p
            .parse("128166372003061630,src1,2,Read,0,512,10")
            .unwrap()
            .unwrap();
        assert_eq!((s.tenant, s.volume, s.op), (1, 2, Op::Read));
        assert!(p
            .parse("1,wdev,0,Erase,0,1,1")
            .unwrap_err()
            .contains("unknown op"));
        assert!(p
            .parse("1,wdev,0,Read,abc,1,1")
            .unwrap_err()
            .contains("`Offset`"));
    }
}
