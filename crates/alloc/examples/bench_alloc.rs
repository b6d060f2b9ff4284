//! Runs the allocation benchmarks once and prints them (what `lachesis bench alloc` shows).

fn main() {
    let a = lachesis_alloc::bench::bench_alloc();
    println!("{}", serde_json::to_string_pretty(&a).expect("serialisable"));
    let m = lachesis_alloc::bench::bench_mlms();
    println!("{}", serde_json::to_string_pretty(&m).expect("serialisable"));
}
