//! Where an http task may connect: not to the machine it runs on nor to the networks behind it,
//! unless the worker's `http_allow` opens them.
//!
//! An http task is written by anyone with the operate role, and the worker makes its request from
//! inside the installation: without a rule, a task could call a tokenless API on 127.0.0.1, a
//! cloud's metadata service (169.254.169.254) or a database's HTTP port on the private network,
//! and read the answer back as the task's output. So by default the worker refuses loopback,
//! unspecified, link-local (the metadata address among them), private (RFC 1918), shared
//! (RFC 6598), unique-local, multicast and broadcast addresses, IPv4 ones also when written as
//! IPv6 (`::ffff:127.0.0.1`, NAT64's `64:ff9b::/96`).
//!
//! The check is on the address that is then used: the worker's client resolves names through
//! [`Guarded`], which drops refused addresses before the connector sees any, so a name cannot
//! resolve to a public address when checked and to 127.0.0.1 when connected (DNS rebinding). A
//! URL that names an address directly is checked by [`HttpPolicy::check_url`] before the request
//! and before each redirect it follows.
//!
//! `worker.http_allow` (`CHIME_WORKER__HTTP_ALLOW`, comma-separated) lists what an installation
//! needs: networks (`10.20.0.0/16`, `127.0.0.1`) whose addresses are allowed, and host names
//! (`billing.internal`, or `*.svc.cluster.local` for every name under it) allowed whatever they
//! resolve to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// What a worker's http tasks may reach beyond the public internet.
#[derive(Debug, Clone, Default)]
pub struct HttpPolicy {
    networks: Vec<IpNet>,
    hosts: Vec<String>,
}

/// The setting that opens a refused address, as errors name it.
const SETTING: &str = "worker.http_allow (CHIME_WORKER__HTTP_ALLOW)";

impl HttpPolicy {
    /// The policy of `http_allow`'s entries: a network (`10.0.0.0/8`), an address (`127.0.0.1`,
    /// `::1`) or a host name (`billing.internal`, `*.svc.cluster.local`). An entry that is none
    /// of these is an error naming it.
    pub fn new(allow: &[String]) -> Result<Self, String> {
        let mut policy = Self::default();
        for entry in allow.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if let Ok(network) = entry.parse::<IpNet>() {
                policy.networks.push(network);
            } else if let Ok(address) = entry.parse::<IpAddr>() {
                policy.networks.push(IpNet::from(address));
            } else if is_host_pattern(entry) {
                policy.hosts.push(entry.to_ascii_lowercase());
            } else {
                return Err(format!(
                    "worker.http_allow: {entry:?} is neither a network (10.0.0.0/8), an address \
                     nor a host name (billing.internal, *.svc.cluster.local)"
                ));
            }
        }
        Ok(policy)
    }

    /// Whether `host` (a URL's host, without brackets) is allowed by name, whatever it resolves
    /// to.
    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts
            .iter()
            .any(|pattern| match pattern.strip_prefix("*.") {
                Some(suffix) => host.len() > suffix.len() && host.ends_with(&format!(".{suffix}")),
                None => *pattern == host,
            })
    }

    /// Why `address`, which `host` names, may not be reached (`None`: it may).
    pub fn refusal(&self, host: &str, address: IpAddr) -> Option<String> {
        let address = canonical(address);
        if self.host_allowed(host) || self.networks.iter().any(|n| n.contains(&address)) {
            return None;
        }
        let rule = refused_range(address)?;
        let named = if host == address.to_string() {
            String::new()
        } else {
            format!("{host} resolves to ")
        };
        Some(format!(
            "refused: {named}{address}, {rule}; http tasks may not reach loopback, link-local, \
             private or unique-local addresses unless {SETTING} lists them"
        ))
    }

    /// Checks a URL before a request (or a redirect) to it: an http or https URL, and, where its
    /// host is an address, one that may be reached (names are checked as they resolve).
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "refused: {:?} is not an http or https URL",
                chime_core::redact::http_url(url.as_str())
            ));
        }
        let address = match url.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(url::Host::Domain(_)) => return Ok(()),
            None => return Err("refused: the URL has no host".into()),
        };
        match self.refusal(&address.to_string(), address) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

/// An IPv4 address written as IPv6 (mapped, or NAT64's well-known prefix) as the IPv4 address it
/// reaches, so that each rule is written once.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
            }
            IpAddr::V6(v6)
        }
        v4 => v4,
    }
}

/// The rule that refuses `address` by default, if any.
fn refused_range(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_unspecified() {
                Some("the unspecified address (this machine)")
            } else if v4 == Ipv4Addr::new(169, 254, 169, 254) {
                Some("the cloud metadata address")
            } else if v4.is_link_local() {
                Some("a link-local address")
            } else if v4.is_private() {
                Some("a private address")
            } else if a == 100 && (64..128).contains(&b) {
                Some("a shared (carrier-grade NAT) address")
            } else if a == 198 && (18..20).contains(&b) {
                // Reserved for benchmarks (RFC 2544), and used inside some networks as private.
                Some("a benchmarking address (198.18.0.0/15)")
            } else if a >= 240 && !v4.is_broadcast() {
                Some("a reserved address (240.0.0.0/4)")
            } else if a == 0 {
                Some("an address of this network (0.0.0.0/8)")
            } else if v4.is_multicast() || v4.is_broadcast() {
                Some("a multicast or broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("the unspecified address (this machine)")
            } else if first & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("a unique-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else if v6 == Ipv6Addr::from([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254]) {
                Some("the cloud metadata address")
            } else {
                None
            }
        }
    }
}

/// A host name as `http_allow` takes it: labels of letters, digits and `-`, optionally after `*.`.
fn is_host_pattern(entry: &str) -> bool {
    let name = entry.strip_prefix("*.").unwrap_or(entry);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// The worker's resolver: the system's (getaddrinfo, as reqwest's own), with every address the
/// policy refuses dropped before the connector sees it; a name left with none fails naming the
/// rule.
pub struct Guarded(pub Arc<HttpPolicy>);

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.refusal(&host, a.ip()) {
                    Some(why) => {
                        refused.get_or_insert(why);
                        false
                    }
                    None => true,
                })
                .collect();
            if allowed.is_empty() {
                let why = refused.unwrap_or_else(|| format!("{host} resolves to no address"));
                return Err(why.into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn the_machine_and_its_networks_are_refused_by_default() {
        let policy = HttpPolicy::default();
        for (address, rule) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("::1", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("169.254.169.254", "metadata"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "shared"),
            ("fd12::1", "unique-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "metadata"),
            ("224.0.0.1", "multicast"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.254", "benchmarking"),
            ("240.0.0.1", "reserved"),
        ] {
            let why = policy.refusal("h", ip(address));
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains(rule) && w.contains(SETTING)),
                "{address}: {why:?}"
            );
        }
        for public in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "8.8.8.8",
            "198.20.0.1",
        ] {
            assert_eq!(policy.refusal("h", ip(public)), None, "{public}");
        }
    }

    #[test]
    fn http_allow_opens_networks_and_names() -> Result<(), String> {
        let policy = HttpPolicy::new(&[
            "10.20.0.0/16".into(),
            "127.0.0.1".into(),
            "billing.internal".into(),
            "*.svc.cluster.local".into(),
        ])?;
        assert_eq!(policy.refusal("x", ip("10.20.3.4")), None);
        assert!(policy.refusal("x", ip("10.21.0.1")).is_some());
        assert_eq!(policy.refusal("x", ip("127.0.0.1")), None);
        assert!(policy.refusal("x", ip("127.0.0.2")).is_some());
        assert_eq!(policy.refusal("Billing.Internal.", ip("10.9.9.9")), None);
        assert_eq!(
            policy.refusal("api.ns.svc.cluster.local", ip("10.9.9.9")),
            None
        );
        assert!(
            policy
                .refusal("svc.cluster.local", ip("10.9.9.9"))
                .is_some()
        );
        assert!(HttpPolicy::new(&["10.0.0.0/33".into()]).is_err());
        assert!(HttpPolicy::new(&["bad name!".into()]).is_err());
        Ok(())
    }

    #[test]
    fn a_url_naming_an_address_is_checked_before_the_request() -> Result<(), String> {
        let policy = HttpPolicy::default();
        let url = |u: &str| reqwest::Url::parse(u).map_err(|e| e.to_string());
        assert!(
            policy
                .check_url(&url("http://127.0.0.1:8080/api")?)
                .is_err()
        );
        assert!(policy.check_url(&url("http://[::1]/")?).is_err());
        assert!(policy.check_url(&url("http://2130706433/")?).is_err());
        assert!(policy.check_url(&url("file:///etc/passwd")?).is_err());
        assert!(policy.check_url(&url("https://example.com/")?).is_ok());
        Ok(())
    }
}
