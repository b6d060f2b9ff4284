//! CloudPhysics vscsi CSV (`version,time,op,size,lbn`), as in libCacheSim's sample data:
//! `op` is a SCSI opcode in hex, `size` bytes, `lbn` a 512-byte sector.
//!
//! `time` is taken as **seconds** (`time_us = time * 10^6`), although the shared README
//! calls it microseconds: the raw vscsi timestamps are microseconds, but libCacheSim's
//! vscsi reader divides them by 10^6 before its conversions, and the sample shows it: its
//! 113,872 requests span 7,200 units, two hours at 16 requests a second (as microseconds it
//! would be 7.2 ms at 16 million IOPS). The oracleGeneral copy of the sample carries the
//! same numbers, which libCacheSim reads as seconds, so the two readers agree on time.
//!
//! Opcodes: READ(6/10/12/16) `08 28 a8 88` → read; WRITE(6/10/12/16) `0a 2a aa 8a` →
//! write; UNMAP `42` → trim; SYNCHRONIZE CACHE(10/16) `35 91` → flush. Anything else is an
//! unknown op (an error, or skipped with `--skip-bad`).

use super::text::{fields, len32, uint, FieldError, LineParser};
use crate::{Op, Request, SECTOR};

/// Parser state (none beyond the header check).
#[derive(Default)]
pub struct CloudPhysics;

/// Maps a SCSI opcode (hex text) to an op.
pub fn scsi_op(code: &str) -> Result<Op, FieldError> {
    let c = code.trim().trim_start_matches("0x");
    let v = u8::from_str_radix(c, 16).map_err(|_| FieldError::NotHexOpcode(code.to_string()))?;
    match v {
        0x08 | 0x28 | 0xa8 | 0x88 => Ok(Op::Read),
        0x0a | 0x2a | 0xaa | 0x8a => Ok(Op::Write),
        0x42 => Ok(Op::Trim),
        0x35 | 0x91 => Ok(Op::Flush),
        _ => Err(FieldError::UnknownOpcode(code.to_string())),
    }
}

impl LineParser for CloudPhysics {
    fn parse(&mut self, line: &str) -> Result<Option<Request>, String> {
        if line.starts_with("version") {
            return Ok(None);
        }
        let mut f = fields(line, ',');
        let mut next = |name: &str| f.next().ok_or_else(|| format!("missing field `{name}`"));
        let _version = next("version")?;
        let time = uint(next("time")?, "time")?;
        let op = scsi_op(next("op")?)?;
        let size = uint(next("size")?, "size")?;
        let lbn = uint(next("lbn")?, "lbn")?;
        Ok(Some(Request {
            time_us: time
                .checked_mul(1_000_000)
                .ok_or_else(|| format!("field `time`: {time} s is too large"))?,
            tenant: 0,
            volume: 0,
            op,
            offset: lbn
                .checked_mul(SECTOR)
                .ok_or_else(|| format!("field `lbn`: {lbn} is past the addressable range"))?,
            len: len32(size, "size")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_read_and_write() {
        let mut p = CloudPhysics;
        assert_eq!(p.parse("version,time,op,size,lbn").unwrap(), None);
        let r = p.parse("1,1000,28,4096,80").unwrap().unwrap();
        assert_eq!(
            (r.op, r.offset, r.len, r.time_us),
            (Op::Read, 80 * 512, 4096, 1_000_000_000)
        );
        assert_eq!(r.object_key(), 80);
        assert_eq!(p.parse("1,1,2a,512,0").unwrap().unwrap().op, Op::Write);
    }

    #[test]
    fn rejects_bad_fields() {
        let mut p = CloudPhysics;
        assert!(p.parse("1,x,28,4096,80").unwrap_err().contains("`time`"));
        assert!(p
            .parse("1,1,ff,4096,80")
            .unwrap_err()
            .contains("unknown SCSI opcode"));
        assert!(p
            .parse("1,1,28,4096")
            .unwrap_err()
            .contains("missing field `lbn`"));
    }
}
