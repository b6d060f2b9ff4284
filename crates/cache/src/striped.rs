//! Striping (RAID-0) over several backends: one tenant volume spread over the storage
//! servers it is connected to.
//!
//! Owns: the address map from a logical byte to a member and an offset on it, splitting
//! requests at stripe boundaries, and the per-member load of a byte range (the node
//! reports per-server load from it). Does not own: redundancy, member health, or
//! rebalancing when members change (the member list is fixed at construction).
//!
//! How: the logical space is cut into stripes of `stripe_unit` bytes; stripe `s` lives
//! on member `s % n` at member offset `(s / n) * unit`, and byte `o` of the volume at
//! `(s / n) * unit + o % unit`. The volume is `n * floor(min member size / unit) * unit`
//! bytes, so every member contributes the same number of whole stripes and the tail of a
//! larger member (or any bytes past the last whole unit) is unused. A contiguous logical
//! range covers a contiguous range on each member (consecutive stripes of one member sit
//! at consecutive member offsets), which is what [`StripedBackend::member_ranges`] returns
//! and what trim uses: one trim per member.
//!
//! Where it falls short: reads and writes issue one member call per stripe touched, in
//! order, on the calling thread — no parallel fan-out and no coalescing of a member's
//! consecutive stripes into one call; a write that fails half-way leaves the stripes
//! before the failure written (like a failed write to one disk). Flush asks every member
//! at once (one thread each) and returns the first member's error, after all have ended.

use crate::backend::Backend;
use crate::error::{CacheError, Result};
use std::io;
use std::ops::Range;
use std::sync::Arc;

/// RAID-0 over `members`, striped every `stripe_unit` bytes.
pub struct StripedBackend {
    members: Vec<Arc<dyn Backend>>,
    unit: u64,
    size: u64,
}

impl StripedBackend {
    /// Stripes over `members` (in order: stripe 0 on `members[0]`) every `stripe_unit`
    /// bytes. Errors: no members, a zero unit, or a size that overflows `u64`.
    pub fn new(members: Vec<Arc<dyn Backend>>, stripe_unit: u64) -> Result<Self> {
        if members.is_empty() {
            return Err(CacheError::Invalid(
                "striped backend needs at least one member".into(),
            ));
        }
        if stripe_unit == 0 {
            return Err(CacheError::Invalid(
                "striped backend: stripe unit must be at least one byte".into(),
            ));
        }
        let min = members.iter().map(|m| m.size()).min().unwrap_or(0);
        let per_member = min / stripe_unit * stripe_unit;
        let size = per_member
            .checked_mul(members.len() as u64)
            .ok_or_else(|| {
                CacheError::Invalid(format!(
                    "striped backend: {} members of {per_member} bytes overflow u64",
                    members.len()
                ))
            })?;
        Ok(StripedBackend {
            members,
            unit: stripe_unit,
            size,
        })
    }

    /// The members, in stripe order.
    pub fn members(&self) -> &[Arc<dyn Backend>] {
        &self.members
    }

    /// Bytes per stripe.
    pub fn stripe_unit(&self) -> u64 {
        self.unit
    }

    /// Where logical byte `offset` lives: `(member index, member offset)`.
    pub fn locate(&self, offset: u64) -> (usize, u64) {
        let n = self.members.len() as u64;
        let s = offset / self.unit;
        ((s % n) as usize, (s / n) * self.unit + offset % self.unit)
    }

    /// For `[offset, offset + len)` (clipped to the volume), the byte range each member
    /// serves, indexed like [`members`](Self::members); members not touched get an empty
    /// range.
    pub fn member_ranges(&self, offset: u64, len: u64) -> Vec<Range<u64>> {
        let n = self.members.len() as u64;
        let end = offset.saturating_add(len).min(self.size);
        let mut out = vec![0..0; self.members.len()];
        if offset >= end {
            return out;
        }
        let first = offset / self.unit;
        let last = (end - 1) / self.unit;
        for m in 0..n {
            // First stripe >= `first` on member m, and last stripe <= `last` on it.
            let lo = first + (m + n - first % n) % n;
            if lo > last {
                continue;
            }
            let hi = last - (last % n + n - m) % n;
            let start = if lo == first {
                (lo / n) * self.unit + offset % self.unit
            } else {
                (lo / n) * self.unit
            };
            let stop = if hi == last {
                (hi / n) * self.unit + (end - 1) % self.unit + 1
            } else {
                (hi / n + 1) * self.unit
            };
            out[m as usize] = start..stop;
        }
        out
    }

    /// How many bytes of `[offset, offset + len)` (clipped to the volume) each member
    /// serves, indexed like [`members`](Self::members).
    pub fn member_bytes(&self, offset: u64, len: u64) -> Vec<u64> {
        self.member_ranges(offset, len)
            .into_iter()
            .map(|r| r.end - r.start)
            .collect()
    }

    fn check(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "range {offset}+{len} beyond striped backend size {}",
                    self.size
                ),
            )),
        }
    }

    /// Calls `f(member, member offset, range of the request)` for every stripe piece of
    /// `[offset, offset + len)`, in order.
    fn for_pieces(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(&dyn Backend, u64, Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut done = 0usize;
        while done < len {
            let pos = offset + done as u64;
            let in_unit = (self.unit - pos % self.unit).min((len - done) as u64) as usize;
            let (m, moff) = self.locate(pos);
            f(&*self.members[m], moff, done..done + in_unit)?;
            done += in_unit;
        }
        Ok(())
    }
}

impl Backend for StripedBackend {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len() as u64)?;
        self.for_pieces(offset, buf.len(), |m, moff, r| m.read_at(moff, &mut buf[r]))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check(offset, data.len() as u64)?;
        self.for_pieces(offset, data.len(), |m, moff, r| m.write_at(moff, &data[r]))
    }

    fn flush(&self) -> io::Result<()> {
        // Every member at once, each on a thread of its own: a member's flush may write
        // back a whole cache (a level-2 node), and the members are independent.
        if self.members.len() == 1 {
            return self.members[0].flush();
        }
        std::thread::scope(|s| {
            let flushing: Vec<_> = self
                .members
                .iter()
                .map(|m| s.spawn(move || m.flush()))
                .collect();
            let mut first = Ok(());
            for f in flushing {
                let r = f
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("a member's flush panicked")));
                if first.is_ok() {
                    first = r;
                }
            }
            first
        })
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check(offset, len)?;
        for (m, r) in self.member_ranges(offset, len).into_iter().enumerate() {
            if r.end > r.start {
                self.members[m].trim(r.start, r.end - r.start)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemBackend;
    use proptest::prelude::*;

    fn mems(sizes: &[u64]) -> (Vec<Arc<MemBackend>>, Vec<Arc<dyn Backend>>) {
        let m: Vec<Arc<MemBackend>> = sizes
            .iter()
            .map(|&s| Arc::new(MemBackend::new(s)))
            .collect();
        let d = m.iter().map(|x| x.clone() as Arc<dyn Backend>).collect();
        (m, d)
    }

    #[test]
    fn size_uses_whole_units_of_the_smallest_member() {
        let (_, d) = mems(&[1000, 950, 2000]);
        let s = StripedBackend::new(d, 100).unwrap();
        assert_eq!(s.size(), 3 * 900);
        assert_eq!(s.stripe_unit(), 100);
        assert_eq!(s.members().len(), 3);
    }

    #[test]
    fn bytes_land_on_the_expected_members_at_the_expected_offsets() {
        let (m, d) = mems(&[400, 400, 400]);
        let s = StripedBackend::new(d, 100).unwrap();
        // Logical 250..650 covers stripes 2 (m2 @0), 3 (m0 @100), 4 (m1 @100), 5 (m2 @100),
        // 6 (m0 @200).
        let data: Vec<u8> = (0..400u32).map(|i| (i % 251) as u8 + 1).collect();
        s.write_at(250, &data).unwrap();
        let snap: Vec<Vec<u8>> = m.iter().map(|x| x.snapshot()).collect();
        assert_eq!(&snap[2][50..100], &data[0..50]);
        assert_eq!(&snap[0][100..200], &data[50..150]);
        assert_eq!(&snap[1][100..200], &data[150..250]);
        assert_eq!(&snap[2][100..200], &data[250..350]);
        assert_eq!(&snap[0][200..250], &data[350..400]);
        let written: usize = snap
            .iter()
            .map(|v| v.iter().filter(|&&b| b != 0).count())
            .sum();
        assert_eq!(written, 400);
        // One member call per stripe piece.
        assert_eq!(m[0].calls().1, 2);
        assert_eq!(m[1].calls().1, 1);
        assert_eq!(m[2].calls().1, 2);
        assert_eq!(s.member_bytes(250, 400), vec![150, 100, 150]);
        assert_eq!(s.member_ranges(250, 400), vec![100..250, 100..200, 50..200]);
        assert_eq!(s.locate(650), (0, 250));
        let mut back = vec![0u8; 400];
        s.read_at(250, &mut back).unwrap();
        assert_eq!(back, data);
        s.flush().unwrap();
        assert!(m.iter().all(|x| x.calls().2 == 1));
    }

    #[test]
    fn trim_is_one_call_per_member_and_zeroes_exactly_the_range() {
        let (m, d) = mems(&[300, 300]);
        let s = StripedBackend::new(d, 64).unwrap();
        assert_eq!(s.size(), 2 * 256);
        s.write_at(0, &[9u8; 512]).unwrap();
        s.trim(60, 200).unwrap();
        let mut all = vec![0u8; 512];
        s.read_at(0, &mut all).unwrap();
        assert!(all[..60].iter().all(|&b| b == 9));
        assert!(all[60..260].iter().all(|&b| b == 0));
        assert!(all[260..].iter().all(|&b| b == 9));
        // Members beyond the striped area are untouched.
        assert!(m[0].snapshot()[256..].iter().all(|&b| b == 0));
        assert_eq!(s.member_bytes(60, 200), vec![72, 128]);
    }

    #[test]
    fn errors_for_bad_construction_and_out_of_range_requests() {
        assert!(matches!(
            StripedBackend::new(vec![], 4096),
            Err(CacheError::Invalid(_))
        ));
        let (_, d) = mems(&[100]);
        assert!(matches!(
            StripedBackend::new(d, 0),
            Err(CacheError::Invalid(_))
        ));
        let (_, d) = mems(&[100, 100]);
        let s = StripedBackend::new(d, 30).unwrap();
        assert_eq!(s.size(), 180);
        let mut buf = [0u8; 10];
        assert!(s.read_at(175, &mut buf).is_err());
        assert!(s.read_at(u64::MAX - 2, &mut buf).is_err());
        assert!(s.write_at(171, &buf).is_err());
        assert!(s.trim(100, 81).is_err());
        assert!(s.trim(u64::MAX, 2).is_err());
        // Smaller members than one unit: an empty volume, every non-empty request fails.
        let (_, d) = mems(&[10, 100]);
        let s = StripedBackend::new(d, 30).unwrap();
        assert_eq!(s.size(), 0);
        assert!(s.read_at(0, &mut buf).is_err());
        assert!(s.read_at(0, &mut []).is_ok());
        assert_eq!(s.member_bytes(0, 100), vec![0, 0]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, Vec<u8>),
        Read(u64, u64),
        Trim(u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..1200, proptest::collection::vec(1u8..=255, 0..300))
                .prop_map(|(o, d)| Op::Write(o, d)),
            (0u64..1200, 0u64..400).prop_map(|(o, l)| Op::Read(o, l)),
            (0u64..1200, 0u64..400).prop_map(|(o, l)| Op::Trim(o, l)),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_flat_model(
            n in 1usize..5,
            unit in 1u64..97,
            extra in proptest::collection::vec(0u64..50, 4),
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            let sizes: Vec<u64> = (0..n).map(|i| 1000 / n as u64 + extra[i]).collect();
            let (m, d) = mems(&sizes);
            let s = StripedBackend::new(d, unit).unwrap();
            let size = s.size();
            prop_assert_eq!(size, n as u64 * (sizes.iter().min().unwrap() / unit) * unit);
            let model = MemBackend::new(size);
            for op in ops {
                match op {
                    Op::Write(o, data) => {
                        let a = s.write_at(o, &data);
                        let b = model.write_at(o, &data);
                        prop_assert_eq!(a.is_ok(), b.is_ok());
                    }
                    Op::Read(o, l) => {
                        let mut x = vec![0u8; l as usize];
                        let mut y = vec![0u8; l as usize];
                        let a = s.read_at(o, &mut x);
                        let b = model.read_at(o, &mut y);
                        prop_assert_eq!(a.is_ok(), b.is_ok());
                        prop_assert_eq!(x, y);
                        let per = s.member_bytes(o, l);
                        prop_assert_eq!(per.iter().sum::<u64>(), (o + l).min(size).saturating_sub(o));
                    }
                    Op::Trim(o, l) => {
                        let a = s.trim(o, l);
                        let b = model.trim(o, l);
                        prop_assert_eq!(a.is_ok(), b.is_ok());
                    }
                }
            }
            let mut all = vec![0u8; size as usize];
            s.read_at(0, &mut all).unwrap();
            prop_assert_eq!(all, model.snapshot());
            // Bytes written through the stripe set all sit inside each member's striped area.
            let per_member = size / n as u64;
            for x in &m {
                prop_assert!(x.snapshot()[per_member as usize..].iter().all(|&b| b == 0));
            }
        }
    }
}
