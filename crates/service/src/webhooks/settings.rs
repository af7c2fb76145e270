//! How webhooks are delivered: what targets are allowed, how often and how long a delivery is
//! tried, and how much is kept. The defaults are the safe ones.

use std::time::Duration;

use switchyard_core::Error;

use super::target::{Allowance, Cidr};

/// Webhook settings; see each field. [`Default`] is what `switchyard serve` uses without a
/// `[webhooks]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSettings {
    /// Allow every target address, private and loopback included (default off). Only for a
    /// gateway whose users are all trusted: a subscription can then reach anything the gateway
    /// can.
    pub allow_private: bool,
    /// Address ranges allowed although not public (`10.1.0.0/16`, `127.0.0.1`).
    pub allowed_cidrs: Vec<String>,
    /// Attempts of one delivery before it is dead-lettered on [`DELIVERY_QUEUE`](super::DELIVERY_QUEUE) (default 8).
    pub max_attempts: u32,
    /// The first retry's delay; each next one doubles (default 5 s).
    pub backoff: Duration,
    /// The longest retry delay (default 1 h).
    pub backoff_cap: Duration,
    /// How long connecting to a receiver may take (default 5 s).
    pub connect_timeout: Duration,
    /// How long one attempt may take, from connecting to the end of the answer (default 15 s).
    pub timeout: Duration,
    /// The most subscriptions a gateway keeps (default 100).
    pub max_subscriptions: usize,
    /// Attempts kept per subscription's delivery log, newest kept (default 100).
    pub log_size: u64,
    /// Deliveries a gateway makes at once (default 4).
    pub concurrency: usize,
    /// How often the dispatcher reads the followed queues' end-event logs (default 500 ms).
    pub dispatch_every: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            allow_private: false,
            allowed_cidrs: Vec::new(),
            max_attempts: 8,
            backoff: Duration::from_secs(5),
            backoff_cap: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            max_subscriptions: 100,
            log_size: 100,
            concurrency: 4,
            dispatch_every: Duration::from_millis(500),
        }
    }
}

impl WebhookSettings {
    /// Checks every setting; an out-of-range one is [`Error::Config`] naming it.
    pub fn check(&self) -> Result<(), Error> {
        self.allowance().map(|_| ())
    }

    pub(crate) fn allowance(&self) -> Result<Allowance, Error> {
        let within = |key: &str, value: Duration, min: Duration, max: Duration| {
            if value < min || value > max {
                Err(Error::config(
                    format!("webhooks.{key}"),
                    format!("must be between {min:?} and {max:?}, got {value:?}"),
                ))
            } else {
                Ok(())
            }
        };
        within(
            "backoff",
            self.backoff,
            Duration::from_millis(10),
            Duration::from_secs(86_400),
        )?;
        within(
            "backoff_cap",
            self.backoff_cap,
            self.backoff,
            Duration::from_secs(86_400),
        )?;
        within(
            "connect_timeout",
            self.connect_timeout,
            Duration::from_millis(10),
            Duration::from_secs(60),
        )?;
        within(
            "timeout",
            self.timeout,
            Duration::from_millis(10),
            Duration::from_secs(300),
        )?;
        within(
            "dispatch_every",
            self.dispatch_every,
            Duration::from_millis(10),
            Duration::from_secs(60),
        )?;
        let count = |key: &str, value: u64, max: u64| {
            if value == 0 || value > max {
                Err(Error::config(
                    format!("webhooks.{key}"),
                    format!("must be between 1 and {max}, got {value}"),
                ))
            } else {
                Ok(())
            }
        };
        count("max_attempts", u64::from(self.max_attempts), 100)?;
        count("max_subscriptions", self.max_subscriptions as u64, 10_000)?;
        count("log_size", self.log_size, 10_000)?;
        count("concurrency", self.concurrency as u64, 256)?;
        let mut ranges = Vec::with_capacity(self.allowed_cidrs.len());
        for text in &self.allowed_cidrs {
            ranges.push(Cidr::parse(text).map_err(|m| Error::config("webhooks.allowed_cidrs", m))?);
        }
        Ok(Allowance {
            private: self.allow_private,
            ranges,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_name_the_key() {
        assert!(WebhookSettings::default().check().is_ok());
        let bad = WebhookSettings {
            max_attempts: 0,
            ..WebhookSettings::default()
        };
        assert!(format!("{:?}", bad.check()).contains("webhooks.max_attempts"));
        let bad = WebhookSettings {
            allowed_cidrs: vec!["10.0.0.0/99".into()],
            ..WebhookSettings::default()
        };
        assert!(format!("{:?}", bad.check()).contains("webhooks.allowed_cidrs"));
    }
}
