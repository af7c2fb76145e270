//! Logs on stderr (`SWITCHYARD_LOG`, default `info`) and, with the `otlp` feature, the same spans
//! exported with OpenTelemetry over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set (ADR 0243). The exporter reads the standard
//! `OTEL_…` variables (headers, timeout, `OTEL_SERVICE_NAME`); the service is `switchyard` unless
//! that says otherwise.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Flushes exported spans when dropped (at the end of `main`).
#[derive(Debug)]
pub struct Telemetry {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("switchyard: flushing the OTLP spans failed: {e}");
        }
    }
}

/// Installs the global subscriber. `SWITCHYARD_LOG` filters the log only: the exported spans
/// are every `request` and `backend_call` span, whatever the log shows.
pub fn init() -> Telemetry {
    let filter =
        EnvFilter::try_from_env("SWITCHYARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal: a pipe or a file goes to log collectors, which
    // would keep the escape codes as text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "otlp")]
    {
        let provider = otlp_provider();
        let layer = provider.as_ref().map(|p| {
            use opentelemetry::trace::TracerProvider as _;
            tracing_opentelemetry::layer()
                .with_tracer(p.tracer("switchyard"))
                .with_filter(EnvFilter::new("info,switchyard=debug"))
        });
        registry.with(layer).init();
        Telemetry { provider }
    }
    #[cfg(not(feature = "otlp"))]
    {
        registry.init();
        Telemetry {}
    }
}

/// The OTLP/HTTP exporter when an endpoint is configured; a broken setup is reported and
/// leaves the logs on.
#[cfg(feature = "otlp")]
fn otlp_provider() -> Option<opentelemetry_sdk::trace::SdkTracerProvider> {
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if !configured {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!("switchyard: OTLP export is off: {e}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("switchyard");
    }
    let resource = resource.build();
    Some(
        opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build(),
    )
}
