//! Fair share and priority partitions.
//!
//! * Priority: a tenant with a priority size gets a dedicated partition of exactly that
//!   many blocks, taken off the top of the capacity before anything else is shared; it
//!   takes no further part in the allocation. Priority sizes that do not fit together are
//!   an error ([`take_priority`]).
//! * Fair share ([`fair_shares`]): weighted max-min fairness ("water level"): tenant `i`
//!   gets `w_i * L` steps for one level `L`, clamped to its `[min_i, max_i]`, with `L`
//!   chosen so the capacity is used (or every tenant is at its maximum). The level is
//!   found by fixing violators and recomputing; whole steps are handed out by largest
//!   remainder (ties to the lowest index), so the shares add up exactly. This is also
//!   MLMS's "fair share" baseline and the point its SLOs are relative to.

use crate::AllocError;

/// Takes the priority partitions (blocks) off the top of `capacity`; returns what is left.
pub fn take_priority(priority: &[Option<u64>], capacity: u64) -> Result<u64, AllocError> {
    let need = priority
        .iter()
        .flatten()
        .fold(0u64, |a, &b| a.saturating_add(b));
    if need > capacity {
        return Err(AllocError::PriorityExceedsCapacity { need, capacity });
    }
    Ok(capacity - need)
}

/// Weighted max-min fair shares of `capacity` steps, each within `[min_i, max_i]`.
/// Zero weights get their minimum. Errors if the minimums do not fit.
pub fn fair_shares(
    weights: &[f64],
    mins: &[u64],
    maxs: &[u64],
    capacity: u64,
) -> Result<Vec<u64>, AllocError> {
    let n = weights.len();
    let need = mins.iter().fold(0u64, |a, &b| a.saturating_add(b));
    if need > capacity {
        return Err(AllocError::MinimumsExceedCapacity { need, capacity });
    }
    let mut fixed: Vec<Option<u64>> = (0..n)
        .map(|i| {
            if weights[i] <= 0.0 || mins[i] >= maxs[i] {
                Some(mins[i])
            } else {
                None
            }
        })
        .collect();
    loop {
        let left = capacity - fixed.iter().flatten().sum::<u64>().min(capacity);
        let w: f64 = (0..n)
            .filter(|&i| fixed[i].is_none())
            .map(|i| weights[i])
            .sum();
        if w <= 0.0 {
            break;
        }
        let share = |i: usize| left as f64 * weights[i] / w;
        let low: Vec<usize> = (0..n)
            .filter(|&i| fixed[i].is_none() && share(i) < mins[i] as f64)
            .collect();
        if !low.is_empty() {
            for i in low {
                fixed[i] = Some(mins[i]);
            }
            continue;
        }
        let high: Vec<usize> = (0..n)
            .filter(|&i| fixed[i].is_none() && share(i) > maxs[i] as f64)
            .collect();
        if !high.is_empty() {
            for i in high {
                fixed[i] = Some(maxs[i]);
            }
            continue;
        }
        // Everyone left fits at this level: floors, then largest remainders.
        let free: Vec<usize> = (0..n).filter(|&i| fixed[i].is_none()).collect();
        let mut given = 0u64;
        for &i in &free {
            let k = share(i).floor() as u64;
            fixed[i] = Some(k);
            given += k;
        }
        let mut rest: Vec<(f64, usize)> = free
            .iter()
            .map(|&i| (share(i) - share(i).floor(), i))
            .collect();
        rest.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut extra = left.saturating_sub(given);
        for (_, i) in rest {
            if extra == 0 {
                break;
            }
            let k = fixed[i].as_mut().expect("set above");
            if *k < maxs[i] {
                *k += 1;
                extra -= 1;
            }
        }
        break;
    }
    Ok(fixed.into_iter().map(|k| k.unwrap_or(0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_split_evenly_with_remainder_to_the_first() {
        let k = fair_shares(&[1.0; 3], &[0; 3], &[u64::MAX; 3], 10).unwrap();
        assert_eq!(k, vec![4, 3, 3]);
    }

    #[test]
    fn weights_caps_and_floors() {
        // Weights 1:3, the heavy one capped at 5: the light one takes the rest.
        assert_eq!(
            fair_shares(&[1.0, 3.0], &[0, 0], &[u64::MAX, 5], 12).unwrap(),
            vec![7, 5]
        );
        // A floor of 6 on the light tenant: the other gets what is left.
        assert_eq!(
            fair_shares(&[1.0, 3.0], &[6, 0], &[u64::MAX; 2], 12).unwrap(),
            vec![6, 6]
        );
        // Everyone capped: capacity stays spare.
        assert_eq!(
            fair_shares(&[1.0, 1.0], &[0, 0], &[2, 3], 12).unwrap(),
            vec![2, 3]
        );
        assert!(matches!(
            fair_shares(&[1.0], &[13], &[20], 12),
            Err(AllocError::MinimumsExceedCapacity {
                need: 13,
                capacity: 12
            })
        ));
    }

    #[test]
    fn priority_off_the_top() {
        assert_eq!(take_priority(&[Some(30), None, Some(20)], 100).unwrap(), 50);
        assert!(matches!(
            take_priority(&[Some(60), Some(50)], 100),
            Err(AllocError::PriorityExceedsCapacity {
                need: 110,
                capacity: 100
            })
        ));
    }
}
