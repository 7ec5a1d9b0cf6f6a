//! Learner throughput: advantage records per second through one PPO update
//! (forward, backward, gradient clipping, Adam) on batches shaped like the
//! bundled tasks' decisions (9 candidates, file-sized candidate texts). The
//! share of time the learner waits for data in the attached loop is reported
//! by `arbor train` (AttachedReport::learner_wait_share) and in the README.

use std::time::Duration;

use arbor_trainer::learner::{Learner, LearnerConfig, Loss, Sample};
use arbor_trainer::model::ModelConfig;
use arbor_trainer::policy::state_features;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tch::Device;

fn batch(n: usize) -> Vec<Sample> {
    (0..n)
        .map(|i| {
            let obs = format!(
                "task: py-task-{i}\nFix the bug in module_{i}.py: tests fail with AssertionError {i}\n$ exec: python3 -m unittest\nFAIL test_{i}"
            );
            let cands: Vec<String> = (0..9)
                .map(|k| {
                    let body: String = (0..40).map(|l| format!("    value_{k}_{l} = compute({l}, {i})\n")).collect();
                    format!("write pkg/module_{k}.py:\ndef f_{k}(x):\n{body}    return x\n")
                })
                .collect();
            Sample {
                state: state_features(&obs, cands.iter()),
                chosen: i % 9,
                behaviour_log_prob: (1.0f64 / 9.0).ln(),
                target_log_prob: (1.0f64 / 9.0).ln(),
                weight: 1.0,
                advantage: if i % 2 == 0 { 0.5 } else { -0.5 },
                version: 0,
            }
        })
        .collect()
}

fn learner(c: &mut Criterion) {
    tch::set_num_threads(1);
    let mut l = Learner::new(
        ModelConfig::default(),
        LearnerConfig::default(),
        Device::cuda_if_available(),
    );
    let b = batch(32);
    let mut group = c.benchmark_group("learner");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(b.len() as u64));
    group.bench_function("ppo_update_32_records", |bench| {
        bench.iter(|| l.update(&b, Loss::Ppo));
    });
    group.finish();
}

criterion_group!(benches, learner);
criterion_main!(benches);
