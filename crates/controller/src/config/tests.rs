//! The configuration file's parsing and checks, field by field.

use super::*;

const GOOD: &str = r#"
[controller]
interval = "2s"
scheme = "lachesis"
[[node]]
name = "l1"
level = 1
[[node]]
name = "l2"
level = 2
[[tenant]]
name = "db"
class = "gold"
slo = { latency_ms = 2.0 }
[[tenant.volume]]
name = "db"
host = "l1"
servers = ["l2"]
"#;

#[test]
fn parses_a_good_file() {
    let c = ControllerConfig::parse(GOOD).unwrap();
    assert_eq!(c.controller.interval, Duration::from_secs(2));
    assert_eq!(c.tenants[0].slo, Some(Slo::LatencyMs(2.0)));
    assert_eq!(c.tenants[0].class().unwrap(), Class::Gold);
    assert_eq!(c.tenants[0].volumes[0].servers, vec!["l2".to_string()]);
}

#[test]
fn errors_name_the_field() {
    let bad = GOOD.replace("scheme = \"lachesis\"", "scheme = \"nope\"");
    let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
    assert!(e.contains("controller.scheme"), "{e}");
    let bad = GOOD.replace("scheme = \"lachesis\"", "scheme = \"independent\"");
    let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
    assert!(e.contains("simulator baseline"), "{e}");
    let bad = GOOD.replace("servers = [\"l2\"]", "servers = []");
    let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
    assert!(e.contains("tenant \"db\".volume \"db\".servers"), "{e}");
    let bad = GOOD.replace("class = \"gold\"", "class = \"platinum\"");
    let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
    assert!(e.contains("tenant \"db\".class"), "{e}");
    let bad = GOOD.replace("latency_ms = 2.0", "latency_ms = -1.0");
    let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
    assert!(e.contains("tenant \"db\".slo"), "{e}");
    let bad = GOOD.replace("interval = \"2s\"", "interval = \"2s\"\ncolour = 1");
    let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
    assert!(e.contains("colour"), "{e}");
    let c = ControllerConfig::parse(GOOD).unwrap();
    let nodes = vec![("l1".to_string(), 1u8)];
    let e = check_tenants(&c.tenants, &[], Some(&nodes)).unwrap_err();
    assert!(e.contains("servers: unknown node `l2`"), "{e}");
}

const IMAGE: &str = r#"
[controller]
[[node]]
name = "h1"
level = 1
[[node]]
name = "h2"
level = 1
[[node]]
name = "s1"
level = 2
[[node]]
name = "s2"
level = 2
[[image]]
name = "golden"
servers = ["s1"]
size = "8MiB"
[[tenant]]
name = "vdi"
[[tenant.volume]]
name = "vm1"
host = "h1"
servers = ["s1"]
image = "golden"
[[tenant.volume]]
name = "vm2"
host = "h2"
servers = ["s1"]
image = "golden"
"#;

#[test]
fn an_image_and_its_readers_parse_and_bad_references_name_the_field() {
    let c = ControllerConfig::parse(IMAGE).unwrap();
    assert_eq!(c.images[0].name, "golden");
    assert_eq!(c.images[0].size, Some(ByteSize(8 << 20)));
    assert_eq!(c.tenants[0].volumes[1].image.as_deref(), Some("golden"));
    let nodes: Vec<(String, u8)> = c.nodes.iter().map(|n| (n.name.clone(), n.level)).collect();
    check_tenants(&c.tenants, &c.images, Some(&nodes)).unwrap();
    check_images(&c.images, &c.tenants, Some(&nodes)).unwrap();
    let err = |text: &str| ControllerConfig::parse(text).unwrap_err().to_string();
    // An unknown image.
    let e = err(&IMAGE.replacen("image = \"golden\"", "image = \"silver\"", 1));
    assert!(
        e.contains("tenant \"vdi\".volume \"vm1\".image: unknown image `silver`")
            && e.contains("images: golden"),
        "{e}"
    );
    // The image on a server the volume does not use, and a server without the image.
    let e = err(&IMAGE.replace(
        "servers = [\"s1\"]\nsize",
        "servers = [\"s1\", \"s2\"]\nsize",
    ));
    assert!(
        e.contains(
            "volume \"vm1\".image: image `golden` is on server `s2`, which the volume does not use"
        ),
        "{e}"
    );
    let e = err(&IMAGE.replacen(
        "servers = [\"s1\"]\nimage",
        "servers = [\"s1\", \"s2\"]\nimage",
        1,
    ));
    assert!(
        e.contains("volume \"vm1\".servers: server `s2` does not hold image `golden`"),
        "{e}"
    );
    // A reader that writes, is exclusive or scaled out.
    let reader = "image = \"golden\"\n[[tenant.volume]]";
    for (extra, field) in [
        ("write_policy = \"write-back\"", "write_policy"),
        ("exclusive = true", "exclusive"),
        ("scale_out = true", "scale_out"),
    ] {
        let e = err(&IMAGE.replacen(reader, &format!("{extra}\n{reader}"), 1));
        assert!(
            e.contains(&format!(
                "volume \"vm1\".{field}: a volume reading image `golden`"
            )),
            "{e}"
        );
    }
    let ok = IMAGE.replacen(
        reader,
        &format!("write_policy = \"read-only\"\n{reader}"),
        1,
    );
    ControllerConfig::parse(&ok).unwrap();
    // The image's own fields.
    let e = err(&IMAGE.replace("size = \"8MiB\"", "size = 0"));
    assert!(e.contains("image \"golden\".size must be above 0"), "{e}");
    let e = err(&IMAGE.replace("servers = [\"s1\"]\nsize", "servers = []\nsize"));
    assert!(
        e.contains("image \"golden\".servers: the image is on no level-2 node"),
        "{e}"
    );
    let e = err(&IMAGE.replace("name = \"golden\"", "name = \"vm2\""));
    assert!(
        e.contains("image \"vm2\".name: tenant \"vdi\" has a volume of that name"),
        "{e}"
    );
    let e = err(&IMAGE.replace("size = \"8MiB\"", "size = \"8MiB\"\ncolour = 1"));
    assert!(e.contains("colour"), "{e}");
    let e = check_images(&c.images, &c.tenants, Some(&nodes[..2])).unwrap_err();
    assert!(
        e.contains("image \"golden\".servers: unknown node `s1`"),
        "{e}"
    );
    let levels = vec![("s1".to_string(), 1u8)];
    let e = check_images(&c.images, &c.tenants, Some(&levels)).unwrap_err();
    assert!(
        e.contains("image \"golden\".servers: node `s1` is level 1, not 2"),
        "{e}"
    );
}
