//! The checks a parsed `controller.toml` (or a tenant or image sent to the API) must pass:
//! numbers in range, names unique and well formed, and every reference (a volume's host
//! and servers, an image's servers, a reader's image) pointing at something that exists
//! with the right level. Each error names the field.

use super::{ControllerConfig, ImageSpec, TenantConfig, VolumeSpec};
use std::time::Duration;

impl ControllerConfig {
    /// Checks numbers, names and references.
    pub(crate) fn check(&self) -> Result<(), String> {
        let c = &self.controller;
        if c.interval.is_zero() {
            return Err("controller.interval = \"0s\" must be above 0".into());
        }
        let scheme =
            control::Scheme::named(&c.scheme).map_err(|e| format!("controller.scheme: {e}"))?;
        if scheme.allocation == control::Allocation::Alone {
            return Err(format!(
                "controller.scheme = \"{}\" is a simulator baseline (each tenant alone on \
                 every node it uses, as if it had the hardware to itself), which real nodes \
                 shared by several tenants cannot run; use \"fair\" or \"uncontrolled\"",
                c.scheme
            ));
        }
        c.bandwidth.check().map_err(|e| e.to_string())?;
        if c.block_size.0 == 0 || !c.block_size.0.is_power_of_two() {
            return Err(format!(
                "controller.block_size = {} must be a power of two",
                c.block_size.0
            ));
        }
        if c.down_after == 0 {
            return Err("controller.down_after must be at least 1".into());
        }
        if c.service.iter().any(Duration::is_zero) {
            return Err("controller.service: three times above 0".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            api::names::check(&format!("node[{i}].name"), &n.name).map_err(|e| e.to_string())?;
            if self.nodes[..i].iter().any(|m| m.name == n.name) {
                return Err(format!("node \"{}\": appears twice", n.name));
            }
            if n.level != 1 && n.level != 2 {
                return Err(format!(
                    "node \"{}\".level = {} must be 1 or 2",
                    n.name, n.level
                ));
            }
        }
        check_images(&self.images, &self.tenants, None)?;
        check_tenants(&self.tenants, &self.images, None)
    }
}

/// Checks the images on their own, against the volumes' names and, given the known nodes
/// (`name`, `level`), their servers; the error names the image and the field.
pub(crate) fn check_images(
    images: &[ImageSpec],
    tenants: &[TenantConfig],
    nodes: Option<&[(String, u8)]>,
) -> Result<(), String> {
    for (i, m) in images.iter().enumerate() {
        let at = format!("image \"{}\"", m.name);
        api::names::check(&format!("image[{i}].name"), &m.name).map_err(|e| e.to_string())?;
        if images[..i].iter().any(|n| n.name == m.name) {
            return Err(format!("{at}: appears twice"));
        }
        if let Some(t) = tenants
            .iter()
            .find(|t| t.volumes.iter().any(|v| v.name == m.name))
        {
            return Err(format!(
                "{at}.name: tenant \"{}\" has a volume of that name (images and volumes \
                 share the nodes' cache names)",
                t.name
            ));
        }
        if m.servers.is_empty() {
            return Err(format!("{at}.servers: the image is on no level-2 node"));
        }
        for (k, s) in m.servers.iter().enumerate() {
            if m.servers[..k].contains(s) {
                return Err(format!("{at}.servers: `{s}` listed twice"));
            }
            if let Some(level) = nodes.map(|n| n.iter().find(|(x, _)| x == s).map(|(_, l)| *l)) {
                match level {
                    None => return Err(format!("{at}.servers: unknown node `{s}`")),
                    Some(2) => {}
                    Some(l) => return Err(format!("{at}.servers: node `{s}` is level {l}, not 2")),
                }
            }
        }
        if m.size.is_some_and(|s| s.0 == 0) {
            return Err(format!("{at}.size must be above 0"));
        }
    }
    Ok(())
}

/// Checks what a volume reading an image must be: the image known, on exactly the
/// volume's servers, and the volume read-only, inclusive and not scaled out.
fn check_reader(vat: &str, v: &VolumeSpec, images: &[ImageSpec]) -> Result<(), String> {
    let Some(name) = v.image.as_deref() else {
        return Ok(());
    };
    let Some(m) = images.iter().find(|m| m.name == name) else {
        let known: Vec<&str> = images.iter().map(|m| m.name.as_str()).collect();
        return Err(format!(
            "{vat}.image: unknown image `{name}` (images: {})",
            if known.is_empty() {
                "none declared".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    if let Some(s) = m.servers.iter().find(|s| !v.servers.contains(s)) {
        return Err(format!(
            "{vat}.image: image `{name}` is on server `{s}`, which the volume does not use \
             (servers = {:?})",
            v.servers
        ));
    }
    if let Some(s) = v.servers.iter().find(|s| !m.servers.contains(s)) {
        return Err(format!(
            "{vat}.servers: server `{s}` does not hold image `{name}` (its servers: {:?})",
            m.servers
        ));
    }
    if v.write_policy
        .as_deref()
        .is_some_and(|wp| wp != "read-only")
    {
        return Err(format!(
            "{vat}.write_policy: a volume reading image `{name}` is read-only; drop it or \
             say \"read-only\""
        ));
    }
    if v.scale_out == Some(true) {
        return Err(format!(
            "{vat}.scale_out: a volume reading image `{name}` has its level 2 in the \
             image's consolidated cache, not a scale-out of its own"
        ));
    }
    if v.exclusive == Some(true) {
        return Err(format!(
            "{vat}.exclusive: a volume reading image `{name}` is inclusive (the \
             consolidated cache keeps what it serves for the other readers)"
        ));
    }
    Ok(())
}

/// Checks tenants on their own and, given the known nodes (`name`, `level`), their
/// references; the error names the tenant, the volume and the field.
pub(crate) fn check_tenants(
    tenants: &[TenantConfig],
    images: &[ImageSpec],
    nodes: Option<&[(String, u8)]>,
) -> Result<(), String> {
    for (i, t) in tenants.iter().enumerate() {
        let at = format!("tenant \"{}\"", t.name);
        api::names::check(&format!("tenant[{i}].name"), &t.name).map_err(|e| e.to_string())?;
        if tenants[..i].iter().any(|u| u.name == t.name) {
            return Err(format!("{at}: appears twice"));
        }
        t.class().map_err(|e| format!("{at}.{e}"))?;
        if let Some(slo) = &t.slo {
            slo.check().map_err(|e| format!("{at}.slo: {e}"))?;
        }
        if let Some(d) = t.depth {
            if !(d.is_finite() && d > 0.0) {
                return Err(format!("{at}.depth = {d} must be above 0"));
            }
        }
        if t.volumes.is_empty() {
            return Err(format!("{at}.volume: a tenant needs at least one volume"));
        }
        for (k, v) in t.volumes.iter().enumerate() {
            let vat = format!("{at}.volume \"{}\"", v.name);
            api::names::check(&format!("{at}.volume[{k}].name"), &v.name)
                .map_err(|e| e.to_string())?;
            let dup = tenants
                .iter()
                .flat_map(|u| &u.volumes)
                .filter(|w| w.name == v.name)
                .count();
            if dup > 1 {
                return Err(format!("{vat}: the volume name is used twice"));
            }
            if v.servers.is_empty() {
                return Err(format!("{vat}.servers: the volume is on no level-2 node"));
            }
            for (k, h) in v.hosts.iter().enumerate() {
                if *h == v.host || v.hosts[..k].contains(h) {
                    return Err(format!("{vat}.hosts: node `{h}` is listed twice"));
                }
            }
            if v.stripe_unit.is_some_and(|s| s.0 == 0) {
                return Err(format!("{vat}.stripe_unit must be above 0"));
            }
            if v.scale_out == Some(true) && v.exclusive == Some(false) {
                return Err(format!(
                    "{vat}.scale_out: a scaled-out volume's levels are one global LRU, so \
                     exclusive; drop `exclusive = false`"
                ));
            }
            check_reader(&vat, v, images)?;
            if let Some(wp) = v
                .write_policy
                .as_deref()
                .filter(|wp| !api::node::WRITE_POLICIES.contains(wp))
            {
                return Err(format!(
                    "{vat}.write_policy: unknown policy `{wp}` ({})",
                    api::node::WRITE_POLICIES.join(", ")
                ));
            }
            if let Some(nodes) = nodes {
                let level = |n: &str| nodes.iter().find(|(m, _)| m == n).map(|(_, l)| *l);
                match level(&v.host) {
                    None => return Err(format!("{vat}.host: unknown node `{}`", v.host)),
                    Some(1) => {}
                    Some(l) => {
                        return Err(format!("{vat}.host: node `{}` is level {l}, not 1", v.host))
                    }
                }
                for h in &v.hosts {
                    match level(h) {
                        None => return Err(format!("{vat}.hosts: unknown node `{h}`")),
                        Some(1) => {}
                        Some(l) => {
                            return Err(format!("{vat}.hosts: node `{h}` is level {l}, not 1"))
                        }
                    }
                }
                for (k, s) in v.servers.iter().enumerate() {
                    match level(s) {
                        None => return Err(format!("{vat}.servers: unknown node `{s}`")),
                        Some(2) => {}
                        Some(l) => {
                            return Err(format!("{vat}.servers: node `{s}` is level {l}, not 2"))
                        }
                    }
                    if v.servers[..k].contains(s) {
                        return Err(format!("{vat}.servers: `{s}` listed twice"));
                    }
                }
            }
        }
    }
    Ok(())
}
