use super::model::{LevelLatencies, TenantModel};
use super::*;

fn tenant(name: &str, pts: &[(u64, f64)], servers: Vec<usize>) -> MlmsTenant {
    let curve = HitRatioCurve::from_pairs(pts.iter().copied()).unwrap();
    MlmsTenant {
        name: name.into(),
        model: TenantModel::Curve {
            curve,
            lat: LevelLatencies {
                lat1: 0.1,
                lat2: 1.0,
                lat_disk: 10.0,
            },
        },
        slo: 1.0,
        latency_target: None,
        host: 0,
        servers,
        rate: 1.0,
    }
}

fn problem() -> MlmsProblem {
    MlmsProblem {
        tenants: vec![
            // Small working set: 40 blocks hold everything.
            tenant("small", &[(0, 1.0), (40, 0.0)], vec![0, 1]),
            // Large working set: gains spread over 400 blocks.
            tenant("large", &[(0, 1.0), (400, 0.0)], vec![0, 1]),
        ],
        hosts: vec![100],
        servers: vec![100, 100],
        grid: 20,
    }
}

#[test]
fn fair_share_is_the_base() {
    let p = problem();
    let f = plan(&p, Scheme::FairShare).unwrap();
    assert_eq!(f.c1, vec![50, 50]);
    assert_eq!(f.c2, vec![100, 100]);
    assert!((f.fair_speedup - 1.0).abs() < 1e-12);
    // small: h1 = 1 → 0.1; large: h1 = 0.125, h2 = 0.375 → 0.0125 + 0.25 + 6.25
    assert!((f.lat_fair[0] - 0.1).abs() < 1e-12);
    assert!((f.lat_fair[1] - 6.5125).abs() < 1e-12);
    assert_eq!(f.placement.per_tenant[0], vec![(0, 50.0), (1, 50.0)]);
}

#[test]
fn mlms_beats_the_baselines_and_keeps_every_slo() {
    let p = problem();
    let m = plan(&p, Scheme::Mlms).unwrap();
    assert!(m.slo_met.iter().all(|&x| x), "{m:?}");
    assert!(m.c1.iter().sum::<u64>() <= 100 && m.c2.iter().sum::<u64>() <= 200);
    // "small" needs only 40 blocks of level 1; "large" gets the rest of both levels.
    assert_eq!(m.c1[0], 40);
    assert_eq!((m.c1[1], m.c2[1]), (60, 200));
    for s in [
        Scheme::FairShare,
        Scheme::Independent,
        Scheme::Uncontrolled,
        Scheme::FirstLevelOnly,
        Scheme::SecondLevelOnly,
    ] {
        let b = plan(&p, s).unwrap();
        assert!(
            m.fair_speedup >= b.fair_speedup - 1e-12,
            "{s:?}: {} vs {}",
            b.fair_speedup,
            m.fair_speedup
        );
    }
    let first = plan(&p, Scheme::FirstLevelOnly).unwrap();
    assert_eq!(first.c2, vec![100, 100]);
    let second = plan(&p, Scheme::SecondLevelOnly).unwrap();
    assert_eq!(second.c1, vec![50, 50]);
}

#[test]
fn impossible_slos_are_reported_not_dropped() {
    let mut p = problem();
    p.tenants[1].slo = 0.01; // wants 1 % of its fair latency: below even a full level 1
    let m = plan(&p, Scheme::Mlms).unwrap();
    assert_eq!(m.slo_met, vec![true, false]);
}

#[test]
fn unconnected_tenant_is_an_error() {
    let mut p = problem();
    p.tenants[0].servers.clear();
    assert_eq!(
        plan(&p, Scheme::Mlms).unwrap_err(),
        AllocError::NoConnectedServer("small".into())
    );
    let mut p = problem();
    p.tenants[0].servers = vec![5];
    assert!(matches!(
        plan(&p, Scheme::Mlms),
        Err(AllocError::BadInput(_))
    ));
}

#[test]
fn regression_model_plans_like_the_truth() {
    // Samples generated from a known regression; the refitted model drives the plan.
    use super::model::{Regression, Sample};
    let truth = Regression {
        theta: [0.2, 3.0, 1.0],
        scale1: 50.0,
        scale2: 100.0,
    };
    let samples: Vec<Sample> = [(0.0, 0.0), (50.0, 100.0), (100.0, 20.0), (10.0, 200.0)]
        .iter()
        .map(|&(c1, c2)| Sample {
            c1,
            c2,
            latency: truth.latency(c1, c2),
        })
        .collect();
    let fitted = Regression::fit(&samples, 50.0, 100.0).unwrap();
    let mut p = problem();
    p.tenants[1].model = TenantModel::Regression(fitted);
    let a = plan(&p, Scheme::Mlms).unwrap();
    p.tenants[1].model = TenantModel::Regression(truth);
    let b = plan(&p, Scheme::Mlms).unwrap();
    assert_eq!((a.c1, a.c2), (b.c1, b.c2));
}

#[test]
fn each_host_shares_only_its_own_level1() {
    // Two hosts of 100 and 20 blocks; "small" is alone on the big host, "large" and
    // "other" share the small one. Fair share follows each host, and MLMS never puts more
    // on a host than it holds, however much a tenant would gain.
    let mut p = problem();
    p.hosts = vec![100, 20];
    p.tenants[1].host = 1;
    let mut other = tenant("other", &[(0, 1.0), (400, 0.0)], vec![0, 1]);
    other.host = 1;
    p.tenants.push(other);
    let f = plan(&p, Scheme::FairShare).unwrap();
    assert_eq!(f.c1, vec![100, 10, 10]);
    let m = plan(&p, Scheme::Mlms).unwrap();
    assert!(m.c1[0] <= 100, "{m:?}");
    assert!(m.c1[1] + m.c1[2] <= 20, "{m:?}");
    assert!(m.c2.iter().sum::<u64>() <= 200);
    // "small" fits in 40 blocks of its host: MLMS does not give it more than it can use
    // ahead of the others' level-2 needs, and every SLO (1.0 × fair) holds.
    assert!(m.slo_met.iter().all(|&x| x), "{m:?}");
    assert!(m.fair_speedup >= 1.0 - 1e-9);
    // A tenant on an unknown host is an error naming it.
    p.tenants[2].host = 5;
    let e = plan(&p, Scheme::Mlms).unwrap_err();
    assert!(
        e.to_string().contains("other") && e.to_string().contains("host 5"),
        "{e}"
    );
}

#[test]
fn all_spare_space_is_handed_out_even_where_no_tenant_gains() {
    // Both working sets fit in level 1 with room to spare: nobody gains from level 2, and
    // the paper's step still hands all of it out (here equally), as it does level 1.
    let mut p = problem();
    p.tenants[1] = tenant("large", &[(0, 1.0), (30, 0.0)], vec![0, 1]);
    let m = plan(&p, Scheme::Mlms).unwrap();
    assert_eq!(m.c1.iter().sum::<u64>(), 100, "{m:?}");
    assert_eq!(m.c2.iter().sum::<u64>(), 200, "{m:?}");
    assert_eq!(m.c2, vec![100, 100]);
    assert!(m.slo_met.iter().all(|&x| x));
}

#[test]
fn combinations_over_capacity_are_filtered_not_repaired() {
    // Three tenants whose cheapest fulfilment points together overrun level 1: the old
    // repair zeroed one of them; the filter keeps only combinations that fit, so every
    // tenant keeps an SLO point and every SLO holds.
    let mut p = problem();
    p.hosts = vec![90];
    p.servers = vec![30, 30];
    p.tenants = ["a", "b", "c"]
        .iter()
        .map(|n| tenant(n, &[(0, 1.0), (60, 0.0)], vec![0, 1]))
        .collect();
    let m = plan(&p, Scheme::Mlms).unwrap();
    assert!(m.slo_met.iter().all(|&x| x), "{m:?}");
    for i in 0..3 {
        assert!(m.c1[i] + m.c2[i] >= 50, "tenant {i} was starved: {m:?}");
    }
    assert!(m.c1.iter().sum::<u64>() <= 90 && m.c2.iter().sum::<u64>() <= 60);
}
