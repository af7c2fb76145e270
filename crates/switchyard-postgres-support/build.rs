// The tests embed `tests/migrations_*` with `sqlx::migrate!`; rebuild when they change.
fn main() {
    println!("cargo:rerun-if-changed=tests/migrations_one");
    println!("cargo:rerun-if-changed=tests/migrations_two");
}
