//! The benchmark runner is filled in by the benchmark issue; see `benches/README.md`.
fn main() {
    eprintln!("rlock benchmarks: not implemented yet (see benches/README.md)");
}
