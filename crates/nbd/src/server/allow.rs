//! Client allow-lists: which client addresses may use an export, as CIDR blocks.
//!
//! Owns the [`Cidr`] block (`10.0.0.0/8`, `::1/128`, or a bare address meaning one host)
//! and the [`AllowList`] of them. An export's provider consults its list through
//! [`ExportProvider::admits`](super::ExportProvider::admits); the negotiation refuses a
//! client outside it with `NBD_REP_ERR_POLICY` (to `NBD_OPT_INFO`/`GO`) or by closing
//! the connection (to `NBD_OPT_EXPORT_NAME`, which has no error reply), and logs it.
//! An IPv4 client reaching an IPv6 listener as `::ffff:a.b.c.d` is matched as `a.b.c.d`.
//! Clients on a Unix-domain socket have no address: file permissions on the socket
//! guard them, and an allow-list admits them only if it lists `unix`.

use std::net::{IpAddr, SocketAddr};

/// A block of addresses: a network address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

/// Why an entry is not an address block; the message names the entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// The part before `/` is no IP address.
    #[error("`{entry}`: `{addr}` is not an IP address")]
    NotAnAddress {
        /// The whole entry.
        entry: String,
        /// Its address part.
        addr: String,
    },
    /// The prefix length is not a number up to the address's bits.
    #[error("`{entry}`: the prefix length must be 0 to {max}")]
    BadPrefix {
        /// The whole entry.
        entry: String,
        /// 32 or 128.
        max: u8,
    },
}

/// An allow-list entry that is not an address block, by its index in the list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("[{index}]: {source}")]
pub struct AllowListError {
    /// The entry's index.
    pub index: usize,
    /// What is wrong with it.
    #[source]
    pub source: CidrError,
}

impl std::str::FromStr for Cidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Self, CidrError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| CidrError::NotAnAddress {
            entry: s.to_string(),
            addr: addr.to_string(),
        })?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => {
                    return Err(CidrError::BadPrefix {
                        entry: s.to_string(),
                        max,
                    })
                }
            },
        };
        Ok(Cidr { net, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

impl Cidr {
    /// Whether `ip` lies in the block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// The clients an export admits: any of the blocks, and Unix-socket clients if `unix` is
/// listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    blocks: Vec<Cidr>,
    unix: bool,
}

impl AllowList {
    /// Parse entries such as `"127.0.0.1/32"`, `"10.0.0.0/8"`, `"::1/128"` or `"unix"`;
    /// the error names the entry by its index.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, AllowListError> {
        let mut list = AllowList::default();
        for (index, e) in entries.iter().enumerate() {
            let e = e.as_ref().trim();
            if e == "unix" {
                list.unix = true;
            } else {
                list.blocks.push(
                    e.parse()
                        .map_err(|source| AllowListError { index, source })?,
                );
            }
        }
        Ok(list)
    }

    /// Whether the client at `peer` (`ip:port` as the server names TCP peers, or `unix`)
    /// is admitted.
    pub fn admits(&self, peer: &str) -> bool {
        if peer == "unix" {
            return self.unix;
        }
        let ip = peer
            .parse::<SocketAddr>()
            .map(|a| a.ip())
            .or_else(|_| peer.parse::<IpAddr>());
        match ip {
            Ok(ip) => self.blocks.iter().any(|b| b.contains(ip)),
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn blocks_match_what_they_should() {
        let l = AllowList::parse(&["127.0.0.1/32", "10.0.0.0/8", "::1/128"]).unwrap();
        assert!(l.admits("127.0.0.1:5000"));
        assert!(!l.admits("127.0.0.2:5000"));
        assert!(l.admits("10.200.3.4:1"));
        assert!(!l.admits("11.0.0.1:1"));
        assert!(l.admits("[::1]:10809"));
        assert!(
            l.admits("[::ffff:10.1.2.3]:7"),
            "v4-mapped v6 peers match v4 blocks"
        );
        assert!(!l.admits("[::2]:1"));
        assert!(!l.admits("unix"));
        assert!(AllowList::parse(&["unix"]).unwrap().admits("unix"));
        assert!(AllowList::parse(&["0.0.0.0/0"])
            .unwrap()
            .admits("8.8.8.8:53"));
        assert!(!AllowList::parse::<&str>(&[]).unwrap().admits("127.0.0.1:1"));
    }

    #[test]
    fn bad_entries_name_themselves() {
        let e = AllowList::parse(&["127.0.0.1/32", "10.0.0.0/33"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[1]") && e.contains("0 to 32"), "{e}");
        let e = AllowList::parse(&["localhost"]).unwrap_err().to_string();
        assert!(e.contains("[0]") && e.contains("not an IP"), "{e}");
        assert!(AllowList::parse(&["::1/129"]).is_err());
        assert!(AllowList::parse(&["1.2.3.4/x"]).is_err());
    }

    proptest! {
        /// A block contains exactly the addresses that agree with it on its prefix bits.
        #[test]
        fn v4_block_membership(net: u32, ip: u32, prefix in 0u8..=32) {
            let c: Cidr = format!("{}/{prefix}", std::net::Ipv4Addr::from(net)).parse().unwrap();
            let agree = (net ^ ip).leading_zeros() >= u32::from(prefix);
            prop_assert_eq!(c.contains(IpAddr::V4(ip.into())), agree);
        }

        #[test]
        fn v6_block_membership(net: u128, ip: u128, prefix in 0u8..=128) {
            let c: Cidr = format!("{}/{prefix}", std::net::Ipv6Addr::from(net)).parse().unwrap();
            let ipa = std::net::Ipv6Addr::from(ip);
            // v4-mapped addresses are matched as IPv4, so leave them out here.
            prop_assume!(ipa.to_ipv4_mapped().is_none());
            let agree = (net ^ ip).leading_zeros() >= u32::from(prefix);
            prop_assert_eq!(c.contains(IpAddr::V6(ipa)), agree);
        }
    }
}
