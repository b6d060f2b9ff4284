//! The exact utility optimum by dynamic programming over tenants and capacity, for any
//! curve shape: the oracle the fast method is tested against, and the answer for small
//! instances.

use super::UtilityProblem;
use crate::AllocError;

/// Exact optimum by dynamic programming over tenants and capacity (O(T · C · K) time,
/// O(T · C) memory); returns the steps per tenant. For small instances.
pub fn exact(p: &UtilityProblem) -> Result<Vec<u64>, AllocError> {
    p.validate()?;
    let s = p.step;
    let c = p.capacity_steps as usize;
    let n = p.tenants.len();
    // best[c]: best value of the tenants so far using at most c steps.
    let mut best = vec![0.0f64; c + 1];
    let mut choice = vec![vec![0u64; c + 1]; n];
    for (i, t) in p.tenants.iter().enumerate() {
        let lo = t.min_steps as usize;
        let hi = (t.top(s) as usize).min(c);
        let vals: Vec<f64> = (lo..=hi).map(|k| t.f(k as u64, s)).collect();
        let mut next = vec![f64::NEG_INFINITY; c + 1];
        for cap in 0..=c {
            for k in lo..=hi.min(cap) {
                let v = best[cap - k] + vals[k - lo];
                if v > next[cap] + 1e-15 {
                    next[cap] = v;
                    choice[i][cap] = k as u64;
                }
            }
        }
        best = next;
    }
    let mut k = vec![0u64; n];
    let mut cap = c;
    for i in (0..n).rev() {
        k[i] = choice[i][cap];
        cap -= k[i] as usize;
    }
    Ok(k)
}
