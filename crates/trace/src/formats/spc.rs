//! UMass / SPC traces (OLTP `Financial1`, `WebSearch1`): `ASU,LBA,Size,Opcode,Timestamp`.
//! `ASU` is the volume, `LBA` a 512-byte sector, `Size` bytes, `Opcode` `r`/`R` or `w`/`W`,
//! `Timestamp` seconds as a decimal.

use super::text::{fields, float, len32, uint, LineParser};
use crate::{Op, Request, SECTOR};

/// Parser (stateless).
#[derive(Default)]
pub struct Spc;

impl LineParser for Spc {
    fn parse(&mut self, line: &str) -> Result<Option<Request>, String> {
        if line.starts_with("ASU") || line.starts_with('#') {
            return Ok(None);
        }
        let mut f = fields(line, ',');
        let mut next = |name: &str| f.next().ok_or_else(|| format!("missing field `{name}`"));
        let asu = uint(next("ASU")?, "ASU")?;
        let lba = uint(next("LBA")?, "LBA")?;
        let size = uint(next("Size")?, "Size")?;
        let op = match next("Opcode")?.trim() {
            "r" | "R" => Op::Read,
            "w" | "W" => Op::Write,
            o => {
                return Err(format!(
                    "field `Opcode`: unknown op `{o}` (expected r or w)"
                ))
            }
        };
        let secs = float(next("Timestamp")?, "Timestamp")?;
        Ok(Some(Request {
            time_us: (secs * 1e6).round() as u64,
            tenant: 0,
            volume: u32::try_from(asu).map_err(|_| format!("field `ASU`: {asu} is too large"))?,
            op,
            offset: lba
                .checked_mul(SECTOR)
                .ok_or_else(|| format!("field `LBA`: {lba} is past the addressable range"))?,
            len: len32(size, "Size")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spc_lines() {
        let mut p = Spc;
        let r = p.parse("0,303567,3584,w,0.000000").unwrap().unwrap();
        assert_eq!(
            (r.volume, r.offset, r.len, r.op),
            (0, 303567 * 512, 3584, Op::Write)
        );
        let s = p.parse("1,55590,512,R,0.025").unwrap().unwrap();
        assert_eq!((s.volume, s.op, s.time_us), (1, Op::Read, 25_000));
        assert!(p
            .parse("1,55590,512,x,0.1")
            .unwrap_err()
            .contains("unknown op"));
    }
}
