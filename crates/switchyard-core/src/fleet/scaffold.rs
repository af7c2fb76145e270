//! TEMPORARY (session 6 coordination only; must be gone before the branch lands): placeholder
//! impls of the new queue areas so that every crate compiles while each adapter's helper writes
//! the real ones. Each adapter replaces its `switchyard_core::fleet_flow_scaffold!` call.

/// Placeholder impls of the new areas for `$ty`; every call answers `InvalidInput`.
#[macro_export]
#[doc(hidden)]
macro_rules! fleet_flow_scaffold {
    ($ty:ty) => {
        #[::async_trait::async_trait]
        impl $crate::fleet::QueueBatches for $ty {
            async fn queue_push_many(
                &self,
                _: &str,
                _: &[Vec<u8>],
                _: $crate::fleet::Priority,
            ) -> $crate::Result<()> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_reserve_many(
                &self,
                _: &str,
                _: usize,
                _: ::std::time::Duration,
                _: ::std::time::Duration,
            ) -> $crate::Result<Vec<$crate::fleet::Delivery>> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_ack_many(
                &self,
                _: &str,
                _: &[$crate::fleet::Receipt],
            ) -> $crate::Result<Vec<bool>> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
        }
        #[::async_trait::async_trait]
        impl $crate::fleet::QueueFlow for $ty {
            async fn queue_pause(&self, _: &str) -> $crate::Result<bool> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_resume(&self, _: &str) -> $crate::Result<bool> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_set_rate_limit(
                &self,
                _: &str,
                _: Option<$crate::fleet::RateLimit>,
            ) -> $crate::Result<()> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_progress(
                &self,
                _: &str,
                _: &$crate::fleet::Receipt,
                _: &[u8],
            ) -> $crate::Result<bool> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_in_flight(
                &self,
                _: &str,
                _: usize,
            ) -> $crate::Result<Vec<$crate::fleet::InFlight>> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_delivered(
                &self,
                _: &str,
                _: &$crate::fleet::Receipt,
            ) -> $crate::Result<Option<$crate::fleet::Delivery>> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn queue_release(
                &self,
                _: &str,
                _: &$crate::fleet::Receipt,
                _: ::std::time::Duration,
            ) -> $crate::Result<bool> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
        }
        #[::async_trait::async_trait]
        impl $crate::fleet::Schedules for $ty {
            async fn schedule_put(&self, _: &str, _: &[u8]) -> $crate::Result<()> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn schedule_get(&self, _: &str) -> $crate::Result<Option<Vec<u8>>> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn schedule_list(
                &self,
            ) -> $crate::Result<::std::collections::BTreeMap<String, Vec<u8>>> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
            async fn schedule_delete(&self, _: &str) -> $crate::Result<bool> {
                Err($crate::Error::invalid("scaffold", "not built yet"))
            }
        }
    };
}
