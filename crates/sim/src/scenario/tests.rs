use super::*;

const OK: &str = r#"
[sim]
block_size = "4KiB"
interval = "30s"
schemes = ["fair", "mlms"]
[[host]]
name = "h1"
cache = "512MiB"
[[server]]
name = "s1"
cache = "1GiB"
disk = { kind = "hdd", rpm = 7200, seek_ms = 8.0 }
[[tenant]]
name = "db"
synthetic = "zipf:objects=1000,requests=100"
host = "h1"
servers = ["s1"]
slo = { degradation = 0.05 }
"#;

fn parse(text: &str) -> Result<Scenario, SimError> {
    Scenario::parse(text, Path::new("/tmp/x.toml"))
}

#[test]
fn a_good_file_resolves_names_and_units() {
    let s = parse(OK).unwrap();
    assert_eq!(s.hosts[0].blocks, 131072);
    assert_eq!(s.servers[0].blocks, 262144);
    assert_eq!(s.tenants[0].stripe_blocks, 16);
    assert_eq!(s.tenants[0].slo, Some(Slo::Degradation(0.05)));
    for (text, slo) in [
        ("{ p95_ms = 4 }", Slo::P95Ms(4.0)),
        ("{ p99_ms = 5 }", Slo::P99Ms(5.0)),
        ("{ p999_ms = 20.5 }", Slo::P999Ms(20.5)),
    ] {
        let t = parse(&OK.replace("{ degradation = 0.05 }", text)).unwrap();
        assert_eq!(t.tenants[0].slo, Some(slo), "{text}");
    }
    let bad = parse(&OK.replace("{ degradation = 0.05 }", "{ p99_ms = -1 }"));
    assert!(bad.unwrap_err().to_string().contains("p99_ms"));
    assert_eq!(s.interval, 30.0);
    assert!(matches!(s.servers[0].disk, DeviceSpec::Hdd { rpm, .. } if rpm == 7200.0));
    // An open loop (at the trace's timestamps here) gets the default queue depth.
    assert_eq!(s.tenants[0].max_in_flight, DEFAULT_MAX_IN_FLIGHT);
    let capped = OK.replace(
        "host = \"h1\"\nservers",
        "rate = 50\nmax_in_flight = 8\nhost = \"h1\"\nservers",
    );
    let s = parse(&capped).unwrap();
    assert_eq!(
        (s.tenants[0].pacing, s.tenants[0].max_in_flight),
        (Pacing::Rate(50.0), 8)
    );
}

#[test]
fn errors_name_the_file_the_key_and_the_reason() {
    let cases = [
        (
            OK.replace("host = \"h1\"\nservers", "host = \"h9\"\nservers"),
            "tenant \"db\".host",
            "h9",
        ),
        (
            OK.replace("servers = [\"s1\"]", "servers = []"),
            "tenant \"db\".servers",
            "no storage server",
        ),
        (
            OK.replace("cache = \"512MiB\"", "cache = \"1000\""),
            "host \"h1\".cache",
            "whole number",
        ),
        (
            OK.replace("schemes = [\"fair\", \"mlms\"]", "schemes = [\"fast\"]"),
            "sim.schemes",
            "fast",
        ),
        (
            OK.replace("degradation = 0.05", "latency_ms = -1"),
            "tenant \"db\".slo",
            "latency_ms",
        ),
        (
            OK.replace("interval = \"30s\"", "interval = \"30s\"\nbogus = 1"),
            "line",
            "bogus",
        ),
        (
            OK.replace("rpm = 7200", "rpm = 0"),
            "server \"s1\".disk",
            "rpm",
        ),
        (
            OK.replace(
                "host = \"h1\"\nservers",
                "depth = 4\nmax_in_flight = 8\nhost = \"h1\"\nservers",
            ),
            "tenant \"db\".max_in_flight",
            "depth",
        ),
        (
            OK.replace(
                "host = \"h1\"\nservers",
                "rate = 100\nmax_in_flight = 0\nhost = \"h1\"\nservers",
            ),
            "tenant \"db\".max_in_flight",
            "at least 1",
        ),
    ];
    for (text, key, reason) in cases {
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.contains("/tmp/x.toml") && e.contains(key) && e.contains(reason),
            "{e}"
        );
    }
}

#[test]
fn dedicated_partitions_that_do_not_fit_are_refused() {
    let text = OK.replace(
        "slo = { degradation = 0.05 }",
        "dedicated = [\"1GiB\", \"4KiB\"]",
    );
    let e = parse(&text).unwrap_err().to_string();
    assert!(e.contains("dedicated") && e.contains("h1"), "{e}");
}

#[test]
fn the_builtin_scenario_loads() {
    let s = Scenario::builtin();
    assert_eq!((s.hosts.len(), s.servers.len(), s.tenants.len()), (2, 2, 4));
}

#[test]
fn units_parse() {
    assert_eq!(parse_seconds("500ms").unwrap(), 0.5);
    assert_eq!(parse_seconds("2m").unwrap(), 120.0);
}

#[test]
fn a_variant_sets_the_write_back_budget_of_a_scheme_that_paces() {
    let variant = |base: &str, share: &str| {
        format!("{OK}[[variant]]\nname = \"v\"\nbase = \"{base}\"\nwrite_back_share = {share}\n")
    };
    let s = parse(&variant("lachesis", "0.02")).unwrap();
    let (_, scheme) = s.resolve("v").unwrap();
    assert_eq!(scheme.hysteresis.unwrap().write_back_share, 0.02);
    let (_, plain) = s.resolve("lachesis").unwrap();
    assert_eq!(plain.hysteresis.unwrap().write_back_share, 0.1);
    for (base, share, says) in [
        ("lachesis", "1.5", "between 0 and 1"),
        ("lachesis", "-0.1", "between 0 and 1"),
        ("fair", "0.02", "no hysteresis"),
    ] {
        let e = parse(&variant(base, share)).unwrap_err().to_string();
        assert!(
            e.contains("variant \"v\".write_back_share") && e.contains(says),
            "{base} {share}: {e}"
        );
    }
}
