//! The catalog of [`MemoryFleetBackend`]: [`Catalog`] (guarantees `catalog.documents` and
//! `queue.names`).

use super::*;

#[async_trait]
impl CatalogOps for MemoryFleetBackend {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        self.state()
            .catalog
            .insert(automation_type.to_string(), doc.to_vec());
        Ok(())
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.state().catalog.get(automation_type).cloned())
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.state().catalog.clone())
    }

    async fn queue_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .state()
            .queues
            .iter()
            .filter(|(_, q)| {
                q.tiers.iter().any(|t| !t.is_empty())
                    || !q.processing.is_empty()
                    || !q.scheduled.is_empty()
                    || !q.dead.is_empty()
            })
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        Ok(names)
    }
}
