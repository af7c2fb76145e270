// The tests embed `tests/migrations` with `sqlx::migrate!`; rebuild when they change.
fn main() {
    println!("cargo:rerun-if-changed=tests/migrations");
}
