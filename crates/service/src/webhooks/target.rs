//! Where a webhook may be sent. Only `http` and `https` URLs, and only to public addresses
//! unless the settings allow more: a subscription must not turn the gateway into a way to reach
//! its own loopback, the cloud's metadata address or the private network behind it. The host is
//! resolved and every address checked at subscription time and again at each delivery, and the
//! delivery connects to the checked addresses only, so a name that resolves elsewhere later
//! (DNS rebinding) is caught.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;

use super::MAX_URL_BYTES;

/// An address range the settings allow although it is not public (`10.0.0.0/8`, `::1/128`,
/// or one address), read and matched by `ipnet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(ipnet::IpNet);

impl Cidr {
    /// Reads `a.b.c.d/n`, `x::y/n` or a single address.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let net = match text.parse::<ipnet::IpNet>() {
            Ok(net) => net,
            Err(_) if !text.contains('/') => text
                .parse::<IpAddr>()
                .map(ipnet::IpNet::from)
                .map_err(|_| format!("{text:?} is not an address or a CIDR range"))?,
            Err(_) => {
                return Err(format!(
                    "{text:?} is not a CIDR range (an address, then `/` and a prefix of 0 to 32, \
                     or to 128 for IPv6)"
                ));
            }
        };
        Ok(Cidr(net))
    }

    /// Whether `ip` is in the range (an IPv4 address written as IPv6 counts as the IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&canonical(ip))
    }
}

/// What the settings allow beyond public addresses.
#[derive(Debug, Clone, Default)]
pub(crate) struct Allowance {
    pub private: bool,
    pub ranges: Vec<Cidr>,
}

impl Allowance {
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.private || is_public(ip) || self.ranges.iter().any(|r| r.contains(ip))
    }
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is judged as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, shared (carrier NAT),
/// link-local, unique-local, unspecified, multicast, broadcast, documentation or reserved.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, _, _] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        // 100.64.0.0/10, carrier-grade NAT: private in practice.
        || (a == 100 && (64..128).contains(&b))
        // 192.0.0.0/24, protocol assignments.
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        // 198.18.0.0/15, benchmarking.
        || (a == 198 && (b == 18 || b == 19))
        // 240.0.0.0/4, reserved.
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // fc00::/7, unique local.
        || (first & 0xfe00) == 0xfc00
        // fe80::/10, link-local.
        || (first & 0xffc0) == 0xfe80
        // 2001:db8::/32, documentation.
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        // 64:ff9b:1::/48 and the NAT64 prefix can reach private IPv4 space.
        || first == 0x0064)
}

/// Reads `url` as a webhook target: `http` or `https`, a host, no credentials, at most
/// [`MAX_URL_BYTES`] long.
pub(crate) fn parse(url: &str) -> Result<Url, String> {
    if url.len() > MAX_URL_BYTES {
        return Err(format!(
            "is {} bytes, longer than the {MAX_URL_BYTES} a webhook URL may have",
            url.len()
        ));
    }
    let parsed = Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("must be http or https, not {:?}", parsed.scheme()));
    }
    if parsed.host().is_none() {
        return Err("has no host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Credentials in a URL end up in logs and listings; a receiver checks the signature.
        return Err("must not carry credentials (user:password@)".into());
    }
    Ok(parsed)
}

/// Resolves the URL's host and checks every address it has: all must be allowed, or the
/// target is refused (one private answer is enough to reach the private network).
pub(crate) async fn resolve(url: &Url, allowance: &Allowance) -> Result<Vec<SocketAddr>, String> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| "has no port".to_string())?;
    let addrs: Vec<SocketAddr> = match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(url::Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| format!("the host {name:?} does not resolve: {e}"))?
            .collect(),
        None => return Err("has no host".into()),
    };
    if addrs.is_empty() {
        return Err("the host resolves to no address".into());
    }
    if let Some(refused) = addrs.iter().find(|a| !allowance.allows(a.ip())) {
        return Err(format!(
            "resolves to {}, which is not a public address (loopback, private, link-local, \
             unique-local, multicast and the like are refused unless the gateway's \
             `webhooks` settings allow them)",
            refused.ip()
        ));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn only_public_addresses_pass_by_default() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "100.64.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(ip(private)), "{private} must be refused");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(ip(public)), "{public} is public");
        }
    }

    #[test]
    fn ranges_allow_what_they_name() {
        let r = Cidr::parse("127.0.0.1").expect("one address");
        assert!(r.contains(ip("127.0.0.1")));
        assert!(!r.contains(ip("127.0.0.2")));
        let r = Cidr::parse("10.0.0.0/8").expect("a range");
        assert!(r.contains(ip("10.200.0.1")));
        assert!(!r.contains(ip("11.0.0.1")));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .expect("all")
                .contains(ip("1.2.3.4"))
        );
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("nope").is_err());
        let allowance = Allowance {
            private: false,
            ranges: vec![Cidr::parse("127.0.0.1/32").expect("loopback")],
        };
        assert!(allowance.allows(ip("127.0.0.1")));
        assert!(!allowance.allows(ip("10.0.0.1")));
    }

    #[test]
    fn urls_are_read_strictly() {
        assert!(parse("https://example.com/hook").is_ok());
        assert!(parse("ftp://example.com/").is_err());
        assert!(parse("http://user:pw@example.com/").is_err());
        assert!(parse("not a url").is_err());
        assert!(parse(&format!("https://e.com/{}", "a".repeat(MAX_URL_BYTES))).is_err());
    }
}
