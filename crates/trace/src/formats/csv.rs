//! Generic CSV with a column mapping, for traces in no known format.
//!
//! Mapping grammar (the part after `csv:` in `--format`), comma-separated `key=value`:
//! * `offset=N` (required), `len=N`, `time=N`, `op=N`, `volume=N`, `tenant=N`: 0-based
//!   column numbers; a missing `len` means every request is `len_default` bytes (default
//!   4096), a missing `op` means reads;
//! * `offset_unit=B` bytes per offset unit (default 1; 512 for sector numbers);
//! * `len_unit=B` bytes per length unit (default 1);
//! * `time_unit=s|ms|us|ns` (default `us`);
//! * `header=0|1` whether the first line is a header (default 0);
//! * `len_default=B` the length when there is no `len` column (default 4096);
//! * `delim=X` one character, or `tab`, `space` (any run of blanks), `semicolon`, `comma`
//!   (default `,`; a bare `delim=,` is also understood, the empty item after it is
//!   swallowed).
//!
//! Example: `csv:time=0,op=1,offset=2,len=3,volume=4,offset_unit=512,time_unit=us,header=1,delim=,`
//!
//! Op values (case-insensitive): `r`, `read`, `rs`, `0` → read; `w`, `write`, `ws`, `1` →
//! write; `t`, `trim`, `d`, `discard`, `unmap` → trim; `f`, `flush`, `sync` → flush.
//! Numbers are decimal; `time` may be fractional.

use super::text::{float, len32, uint, LineParser};
use crate::{Op, Request, TraceError};

/// A parsed column mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvMapping {
    offset: usize,
    len: Option<usize>,
    time: Option<usize>,
    op: Option<usize>,
    volume: Option<usize>,
    tenant: Option<usize>,
    offset_unit: u64,
    len_unit: u64,
    len_default: u32,
    time_scale_us: f64,
    header: bool,
    delim: char,
}

impl std::str::FromStr for CsvMapping {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, TraceError> {
        let bad = |m: String| TraceError::Usage(format!("csv mapping `{s}`: {m}"));
        let mut m = CsvMapping {
            offset: usize::MAX,
            len: None,
            time: None,
            op: None,
            volume: None,
            tenant: None,
            offset_unit: 1,
            len_unit: 1,
            len_default: 4096,
            time_scale_us: 1.0,
            header: false,
            delim: ',',
        };
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let mut i = 0;
        while i < parts.len() {
            let part = parts[i];
            i += 1;
            if part == "delim=" {
                // `delim=,`: the comma split the item; swallow the empty one it left.
                m.delim = ',';
                if parts.get(i) == Some(&"") {
                    i += 1;
                }
                continue;
            }
            if part.is_empty() {
                continue;
            }
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("`{part}` is not key=value")))?;
            let col = || {
                v.parse::<usize>()
                    .map_err(|_| bad(format!("`{k}`: `{v}` is not a column number")))
            };
            let num = || {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("`{k}`: `{v}` is not a number")))
            };
            match k {
                "offset" => m.offset = col()?,
                "len" | "size" => m.len = Some(col()?),
                "time" => m.time = Some(col()?),
                "op" => m.op = Some(col()?),
                "volume" => m.volume = Some(col()?),
                "tenant" => m.tenant = Some(col()?),
                "offset_unit" => m.offset_unit = num()?.max(1),
                "len_unit" => m.len_unit = num()?.max(1),
                "len_default" => {
                    m.len_default = num()?
                        .try_into()
                        .map_err(|_| bad("len_default too large".into()))?
                }
                "time_unit" => {
                    m.time_scale_us = match v {
                        "s" => 1e6,
                        "ms" => 1e3,
                        "us" => 1.0,
                        "ns" => 1e-3,
                        _ => return Err(bad(format!("time_unit `{v}`: use s, ms, us or ns"))),
                    }
                }
                "header" => m.header = v == "1" || v == "true",
                "delim" => {
                    m.delim = match v {
                        "tab" => '\t',
                        "space" => ' ',
                        "semicolon" => ';',
                        "comma" => ',',
                        _ if v.chars().count() == 1 => v.chars().next().unwrap_or(','),
                        _ => return Err(bad(format!("delim `{v}` is not one character"))),
                    }
                }
                _ => return Err(bad(format!("unknown key `{k}`"))),
            }
        }
        if m.offset == usize::MAX {
            return Err(bad("the `offset` column is required".into()));
        }
        Ok(m)
    }
}

/// Parser state: the mapping and whether the header is still to come.
pub struct GenericCsv {
    map: CsvMapping,
    header_pending: bool,
}

impl GenericCsv {
    /// A parser for `map`.
    pub fn new(map: CsvMapping) -> Self {
        let header_pending = map.header;
        GenericCsv {
            map,
            header_pending,
        }
    }
}

fn parse_op(v: &str) -> Result<Op, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "r" | "read" | "rs" | "0" => Ok(Op::Read),
        "w" | "write" | "ws" | "1" => Ok(Op::Write),
        "t" | "trim" | "d" | "discard" | "unmap" => Ok(Op::Trim),
        "f" | "flush" | "sync" => Ok(Op::Flush),
        o => Err(format!("field `op`: unknown op `{o}`")),
    }
}

impl LineParser for GenericCsv {
    fn parse(&mut self, line: &str) -> Result<Option<Request>, String> {
        if self.header_pending {
            self.header_pending = false;
            return Ok(None);
        }
        let cols: Vec<&str> = if self.map.delim == ' ' {
            line.split_whitespace().collect()
        } else {
            line.split(self.map.delim).collect()
        };
        let get = |i: usize, name: &str| {
            cols.get(i)
                .copied()
                .ok_or_else(|| format!("missing field `{name}` (column {i})"))
        };
        let m = &self.map;
        let offset = uint(get(m.offset, "offset")?, "offset")?
            .checked_mul(m.offset_unit)
            .ok_or("field `offset`: past the addressable range")?;
        let len = match m.len {
            Some(c) => len32(
                uint(get(c, "len")?, "len")?.saturating_mul(m.len_unit),
                "len",
            )?,
            None => m.len_default,
        };
        let time_us = match m.time {
            Some(c) => (float(get(c, "time")?, "time")? * m.time_scale_us).round() as u64,
            None => 0,
        };
        let op = match m.op {
            Some(c) => parse_op(get(c, "op")?)?,
            None => Op::Read,
        };
        let small = |c: Option<usize>, name: &str| -> Result<u32, String> {
            match c {
                Some(c) => u32::try_from(uint(get(c, name)?, name)?)
                    .map_err(|_| format!("field `{name}` is too large")),
                None => Ok(0),
            }
        };
        Ok(Some(Request {
            time_us,
            tenant: small(m.tenant, "tenant")?,
            volume: small(m.volume, "volume")?,
            op,
            offset,
            len,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_columns() {
        let map: CsvMapping = "time=0,op=1,offset=2,len=3,offset_unit=512,time_unit=s,header=1"
            .parse()
            .unwrap();
        let mut p = GenericCsv::new(map);
        assert_eq!(p.parse("t,op,lba,bytes").unwrap(), None);
        let r = p.parse("1.5,W,10,8192").unwrap().unwrap();
        assert_eq!(
            (r.time_us, r.op, r.offset, r.len),
            (1_500_000, Op::Write, 5120, 8192)
        );
        assert!(p.parse("1.5,X,10,8192").unwrap_err().contains("unknown op"));
        assert!(p
            .parse("1.5,R")
            .unwrap_err()
            .contains("missing field `offset`"));
    }

    #[test]
    fn mapping_errors_name_the_key() {
        assert!("len=3"
            .parse::<CsvMapping>()
            .unwrap_err()
            .to_string()
            .contains("offset"));
        assert!("offset=1,bogus=2"
            .parse::<CsvMapping>()
            .unwrap_err()
            .to_string()
            .contains("bogus"));
        let comma: CsvMapping =
            "time=0,op=1,offset=2,len=3,volume=4,offset_unit=512,time_unit=us,header=1,delim=,"
                .parse()
                .unwrap();
        assert_eq!(comma.delim, ',');
        assert!(comma.header);
        let mut p = GenericCsv::new(comma);
        assert_eq!(p.parse("time,op,lba,len,vol").unwrap(), None);
        let r = p.parse("7,Read,3,1024,2").unwrap().unwrap();
        assert_eq!(
            (r.time_us, r.op, r.offset, r.len, r.volume),
            (7, Op::Read, 1536, 1024, 2)
        );
        let semi: CsvMapping = "delim=,,offset=1,delim=semicolon".parse().unwrap();
        assert_eq!((semi.delim, semi.offset), (';', 1));
        let tab: CsvMapping = "offset=0,delim=tab".parse().unwrap();
        let mut p = GenericCsv::new(tab);
        assert_eq!(p.parse("4096\t1").unwrap().unwrap().offset, 4096);
    }
}
