//! `blkparse` default text output, e.g.
//! `  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]`:
//! device, CPU, sequence, time (seconds), pid, action, RWBS, `sector + count` (512-byte
//! sectors), process.
//!
//! One action kind is read (default `Q`, the request as issued; `C` completion or `D`
//! dispatch are the other useful ones); lines of other actions, `m` messages and the
//! per-CPU summaries are skipped, not errors. RWBS: `D` discard → trim, `W` → write, `R` →
//! read (both need a `sector + count` range), an `F…` event without a range (`FN`, `FWS`,
//! `FWFS`) or a zero-length write with `F` → flush; a bare `N` (no data) is skipped; the
//! flags `S M A F E` are otherwise ignored (`FWFS 800 + 8` is a write with preflush/FUA).
//! Each device (`8,0`) becomes a volume, ids in first-seen order.

use super::text::{float, len32, uint, LineParser, NameIds};
use crate::{Op, Request, SECTOR};

/// Parser state: which action to read and device ids.
pub struct Blkparse {
    action: String,
    devices: NameIds,
}

impl Blkparse {
    /// Reads lines of `action` (`Q`, `C`, `D`, …).
    pub fn new(action: &str) -> Self {
        Blkparse {
            action: action.to_string(),
            devices: NameIds::default(),
        }
    }
}

impl Default for Blkparse {
    fn default() -> Self {
        Blkparse::new("Q")
    }
}

impl LineParser for Blkparse {
    fn parse(&mut self, line: &str) -> Result<Option<Request>, String> {
        let t: Vec<&str> = line.split_whitespace().collect();
        // A trace event has a "maj,min" device first and at least 7 fields.
        if t.len() < 7 || !t[0].contains(',') || t[0].split(',').any(|x| x.parse::<u32>().is_err())
        {
            return Ok(None);
        }
        if t[5] != self.action {
            return Ok(None);
        }
        let secs = float(t[3], "time")?;
        let rwbs = t[6];
        let has_range = t.len() >= 10 && t[8] == "+";
        let op = if rwbs.contains('D') {
            Op::Trim
        } else if has_range && rwbs.contains('W') {
            Op::Write
        } else if has_range && rwbs.contains('R') {
            Op::Read
        } else if rwbs.contains('F') {
            // `FN`, `FWS`, `FWFS` without a range: a cache flush (preflush) request.
            Op::Flush
        } else if rwbs == "N" {
            // No data and no flush (e.g. a pass-through command): not block I/O.
            return Ok(None);
        } else if rwbs.contains('R') || rwbs.contains('W') {
            return Err(format!("event `{rwbs}` has no `sector + count` range"));
        } else {
            return Err(format!("field `rwbs`: unknown op `{rwbs}`"));
        };
        let (offset, len) = if has_range && op != Op::Flush {
            let sector = uint(t[7], "sector")?;
            let count = uint(t[9], "count")?;
            (
                sector.checked_mul(SECTOR).ok_or_else(|| {
                    format!("field `sector`: {sector} is past the addressable range")
                })?,
                len32(count * SECTOR, "count")?,
            )
        } else {
            (0, 0)
        };
        // A zero-length write carrying a flush flag is a flush.
        let op = if op == Op::Write && len == 0 && rwbs.contains('F') {
            Op::Flush
        } else {
            op
        };
        Ok(Some(Request {
            time_us: (secs * 1e6).round() as u64,
            tenant: 0,
            volume: self.devices.id(t[0]),
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
    fn reads_queue_events_and_skips_the_rest() {
        let mut p = Blkparse::default();
        let r = p
            .parse("  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]")
            .unwrap()
            .unwrap();
        assert_eq!((r.op, r.offset, r.len), (Op::Write, 223490 * 512, 4096));
        assert_eq!(
            p.parse("  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]")
                .unwrap(),
            None
        );
        assert_eq!(p.parse("CPU0 (8,0):").unwrap(), None);
        assert_eq!(
            p.parse(" Reads Queued:           0,        0KiB").unwrap(),
            None
        );
        let d = p
            .parse("  8,16   0        5     1.500000000   10  Q  DS 100 + 16 [fstrim]")
            .unwrap()
            .unwrap();
        assert_eq!((d.op, d.volume, d.time_us), (Op::Trim, 1, 1_500_000));
        let f = p
            .parse("  8,0    1        9     2.0   99  Q FWS [jbd2/sda1-8]")
            .unwrap()
            .unwrap();
        assert_eq!(f.op, Op::Flush);
        for flush in ["FN", "FWFS", "FWS"] {
            let line = format!("  8,0    1        9     2.0   99  Q {flush} [kworker]");
            assert_eq!(p.parse(&line).unwrap().unwrap().op, Op::Flush, "{flush}");
        }
        let fua = p
            .parse("  8,0    1        9     2.0   99  Q FWFS 800 + 8 [jbd2]")
            .unwrap()
            .unwrap();
        assert_eq!((fua.op, fua.offset, fua.len), (Op::Write, 800 * 512, 4096));
        let empty = p
            .parse("  8,0    1        9     2.0   99  Q FWS 0 + 0 [jbd2]")
            .unwrap()
            .unwrap();
        assert_eq!(empty.op, Op::Flush);
        assert_eq!(
            p.parse("  8,0    0        0     0.000000000     0  m   N cfq697 insert_request")
                .unwrap(),
            None
        );
        assert!(p
            .parse("  8,0    1        9     2.0   99  Q  RA x + 8 [a]")
            .unwrap_err()
            .contains("`sector`"));
    }
}
