//! The catalog of [`MemoryFleetBackend`]: [`Catalog`] (guarantee 21).

use super::*;

#[async_trait]
impl Catalog for MemoryFleetBackend {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        check_name("automation_type", automation_type)?;
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
}
