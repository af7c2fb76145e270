//! Stored schedules of [`MemoryFleetBackend`]: [`Schedules`] (guarantee `schedule.stored`).

use super::*;

#[async_trait]
impl ScheduleOps for MemoryFleetBackend {
    async fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()> {
        self.state()
            .schedules
            .insert(name.to_string(), doc.to_vec());
        Ok(())
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.state().schedules.get(name).cloned())
    }

    async fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.state().schedules.clone())
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        Ok(self.state().schedules.remove(name).is_some())
    }
}
