//! `switchyard webhook …` (ADR 0395): webhook subscriptions and their delivery logs, through a
//! gateway (whose settings decide which targets are allowed).

use std::process::ExitCode;

use comfy_table::Cell;
use serde_json::Value;
use switchyard_service::webhooks::CreateWebhook;

use super::source::to_json;
use super::table::{self, raw};
use super::{Failure, NOT_FOUND, Ops, print_json};
use crate::GwArgs;

/// What `webhook create` sends.
#[derive(Debug, Clone)]
pub struct WebhookCreate {
    pub url: String,
    pub events: Vec<String>,
    pub namespaces: Vec<String>,
    pub queues: Vec<String>,
    pub secret: Option<String>,
}

impl Ops {
    /// `webhook create`: prints the subscription and its secret, shown this once.
    pub async fn webhook_create(
        &self,
        gw: &GwArgs,
        create: WebhookCreate,
    ) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("webhook create")?;
        let request = CreateWebhook {
            url: create.url,
            events: create.events,
            namespaces: (!create.namespaces.is_empty()).then_some(create.namespaces),
            queues: create.queues,
            secret: create.secret,
        };
        let created = gateway.create_webhook(&request).await?;
        if gw.json {
            print_json(&to_json(&created));
        } else {
            println!("webhook {}", created.webhook.id);
            println!("url     {}", created.webhook.url);
            println!("events  {}", created.webhook.events.join(", "));
            println!("secret  {}", created.secret);
            eprintln!("keep the secret: it is not shown again");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `webhook ls`: every subscription, without secrets.
    pub async fn webhook_ls(&self, gw: &GwArgs) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("webhook ls")?;
        let list = gateway.webhooks().await?;
        if gw.json {
            print_json(&to_json(&list));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table =
            self.style
                .table(&["ID", "URL", "EVENTS", "NAMESPACES", "QUEUES", "CREATED"]);
        for w in &list.webhooks {
            table.add_row(vec![
                Cell::new(&w.id),
                Cell::new(&w.url),
                Cell::new(w.events.join(",")),
                Cell::new(w.namespaces.as_ref().map_or("*".into(), |n| n.join(","))),
                Cell::new(w.queues.join(",")),
                Cell::new(&w.created_at),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} webhook(s)", list.webhooks.len());
        Ok(ExitCode::SUCCESS)
    }

    /// `webhook rm`.
    pub async fn webhook_rm(&self, gw: &GwArgs, id: &str) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("webhook rm")?;
        let deleted = gateway.delete_webhook(id).await?;
        if !deleted.deleted {
            return Err(Failure::exit(
                NOT_FOUND,
                format!("no webhook {id:?}; `switchyard webhook ls` lists them"),
            ));
        }
        if gw.json {
            print_json(&to_json(&deleted));
        } else {
            println!("webhook {id} deleted");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `webhook deliveries`: the delivery log, newest first.
    pub async fn webhook_deliveries(&self, gw: &GwArgs, id: &str) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("webhook deliveries")?;
        let log = gateway.webhook_deliveries(id).await?;
        if gw.json {
            print_json(&to_json(&log));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self.style.table(&[
            "AT",
            "EVENT",
            "WEBHOOK-ID",
            "ATTEMPT",
            "STATUS",
            "MS",
            "ERROR",
        ]);
        for d in &log.deliveries {
            table.add_row(vec![
                Cell::new(&d.at),
                Cell::new(&d.event),
                Cell::new(&d.webhook_id),
                Cell::new(d.attempt),
                Cell::new(raw(d.status.map(Value::from).as_ref())),
                Cell::new(d.latency_ms),
                Cell::new(d.error.as_deref().unwrap_or("")),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} attempt(s)", log.deliveries.len());
        Ok(ExitCode::SUCCESS)
    }
}
