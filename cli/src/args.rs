//! The command line grammar (clap derive): global flags and one variant per
//! command. Parsing only; the commands themselves live in [`crate::commands`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Default wall-clock limit of one action, in seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

/// Arbor: copy-on-write sandboxes for agents — snapshot, fork, diff, verify.
#[derive(Debug, Parser)]
#[command(
    name = "arbor",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// The store directory [default: $ARBOR_HOME, else $XDG_DATA_HOME/arbor,
    /// else ~/.local/share/arbor].
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Print exactly one JSON object on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Snapshot a host directory as a root snapshot and print its id.
    ///
    /// With `--wasm GUEST`, boot a WebAssembly guest instead (`python`: the
    /// bundled RustPython session; or a wasm32-wasip1 module file) and list
    /// its live session, memory and all, as a root session snapshot; DIR,
    /// if given, becomes its initial /workspace. `exec`, `fanout`, `log`,
    /// `show`, `diff`, `checkout`, `replay`, `tag`, `rm` and `gc` then work
    /// on it and its descendants, a command being one step of code.
    Import {
        /// The directory to import (symlinks are copied, never followed).
        #[arg(required_unless_present = "wasm")]
        dir: Option<PathBuf>,
        /// Also tag the new snapshot.
        #[arg(long, value_name = "T")]
        tag: Option<String>,
        /// Boot this WebAssembly guest: `python`, or a .wasm file.
        #[arg(long, value_name = "GUEST")]
        wasm: Option<String>,
        /// The guest's random seed, 64 hex digits [default: all zeros].
        #[arg(long, value_name = "HEX", requires = "wasm")]
        seed: Option<String>,
        /// Put the workspace on this image (name or id, see `arbor image
        /// ls`): sandboxes see the image's root filesystem, not the host's.
        #[arg(long, value_name = "IMAGE", conflicts_with = "wasm")]
        image: Option<String>,
        /// Also put the workspace at the image's WorkingDir, where actions
        /// start (as a container on the image would see its project).
        #[arg(long, requires = "image")]
        workdir: bool,
    },
    /// Snapshot bundles: move snapshots between stores as one verified stream.
    Bundle {
        /// What to do.
        #[command(subcommand)]
        command: BundleCommand,
    },
    /// Remotes: S3-compatible object stores snapshots are pushed to and
    /// pulled from (credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
    Remote {
        /// What to do.
        #[command(subcommand)]
        command: RemoteCommand,
    },
    /// Upload snapshots (and their parent chains) to a remote: only what it
    /// lacks is sent, and a snapshot appears there only once all of it has.
    Push {
        /// The remote's name (see `arbor remote list`).
        remote: String,
        /// Snapshot ids, unique id prefixes, or tags (a tag is pushed with its snapshot).
        #[arg(required = true, value_name = "SNAP")]
        snapshots: Vec<String>,
    },
    /// Download snapshots from a remote: every byte is verified and nothing
    /// is stored unless all of it checks out; what this store has is not fetched.
    Pull {
        /// The remote's name.
        remote: String,
        /// Full snapshot ids or tags on the remote.
        #[arg(required = true, value_name = "SNAP|TAG")]
        what: Vec<String>,
    },
    /// Container images (OCI layout, oci-archive, docker-archive) as layer chains.
    Image {
        /// What to do.
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Run a shell command in a fresh fork of a snapshot.
    ///
    /// CMD is joined with spaces and run by `bash -c` in /workspace. Its
    /// stdout and stderr are printed as captured and arbor exits with its
    /// status: the command's code, 128+N when killed by signal N, 124 on
    /// timeout, 125 when the workspace grew past its disk limit.
    Exec {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: String,
        /// Snapshot the result and print the new id (on stderr in text mode).
        #[arg(long)]
        commit: bool,
        /// Tag the committed snapshot.
        #[arg(long, value_name = "T", requires = "commit")]
        tag: Option<String>,
        /// Wall-clock limit in seconds; the whole process tree is killed when it passes.
        #[arg(long, value_name = "S", default_value_t = DEFAULT_TIMEOUT_S, value_parser = parse_timeout)]
        timeout: f64,
        /// Let the command reach exactly these host names through Arbor's
        /// egress proxy (HTTP(S)_PROXY is set); every connection is listed.
        #[arg(
            long = "allow-host",
            value_name = "HOST[,HOST...]",
            value_delimiter = ','
        )]
        allow_host: Vec<String>,
        /// The command, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run each command in its own fork of a snapshot, concurrently.
    ///
    /// Prints a table of command, exit status, duration, committed snapshot
    /// and first line of stdout. Exits 1 if a fork could not be run or
    /// committed; the commands' own exit statuses are only reported.
    Fanout {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: String,
        /// A shell command; repeat for each fork.
        #[arg(long = "cmd", value_name = "C", required = true)]
        commands: Vec<String>,
        /// Snapshot each fork's result.
        #[arg(long)]
        commit: bool,
        /// Tag the i-th committed result PREFIX-i (counting from 1).
        #[arg(long, value_name = "PREFIX", requires = "commit")]
        tag_prefix: Option<String>,
        /// Wall-clock limit of each command in seconds.
        #[arg(long, value_name = "S", default_value_t = DEFAULT_TIMEOUT_S, value_parser = parse_timeout)]
        timeout: f64,
    },
    /// Added (+), modified (~) and deleted (-) paths from snapshot A to B.
    Diff {
        /// The older snapshot.
        a: String,
        /// The newer snapshot.
        b: String,
    },
    /// The chain of snapshots and actions from the root to SNAP.
    Log {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: String,
    },
    /// Re-execute a snapshot's action chain from its root, in fresh forks,
    /// and report every step whose observations (stdout, stderr, exit
    /// status, filesystem delta) differ from the recorded ones.
    ///
    /// Exits 0 when the replay is identical, 1 when a step diverged.
    Replay {
        /// Snapshot id, unique id prefix, or tag (not needed with --explain).
        #[arg(required_unless_present = "explain")]
        snapshot: Option<String>,
        /// Stop at the first divergent step.
        #[arg(long)]
        strict: bool,
        /// Print the determinism controls and the paths left out of digests.
        #[arg(long)]
        explain: bool,
    },
    /// Materialise a snapshot into a host directory (absent or empty).
    ///
    /// Every layer file is verified first: a corrupt file fails the checkout
    /// and is named.
    Checkout {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: String,
        /// Destination directory.
        dir: PathBuf,
    },
    /// List the snapshots, oldest first.
    Ls,
    /// Print a snapshot's manifest as JSON.
    Show {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: String,
    },
    /// Name a snapshot, delete a name, or list the names.
    ///
    /// `tag SNAP NAME` points NAME at SNAP (moving it if it exists),
    /// `tag --delete NAME` deletes it, `tag` lists every tag.
    Tag {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: Option<String>,
        /// The tag name: 1-100 characters of A-Z a-z 0-9 . _ -, not starting with '.'.
        name: Option<String>,
        /// Delete this tag.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["snapshot", "name"])]
        delete: Option<String>,
    },
    /// Unlist a snapshot and delete its tags; its data is freed by `arbor gc`.
    Rm {
        /// Snapshot id, unique id prefix, or tag.
        snapshot: String,
    },
    /// Collect garbage: everything no tag reaches.
    ///
    /// Kept: tagged snapshots, their ancestors, and the bases of running
    /// sandboxes. Untagged snapshots outside those chains are unlisted and
    /// their data removed.
    Gc,
    /// Verify the whole store; exit 1 if anything is damaged.
    ///
    /// Re-hashes every object and every file of every sealed layer against
    /// its tree. Garbage (what gc would remove) is only reported.
    Fsck,
    /// Grow rollout trees: run a policy on tasks, branching from real
    /// snapshots, under a budget of executed actions plus verifier runs.
    ///
    /// Writes the trees to --out, tags their leaves (so `gc` keeps every
    /// node's snapshot), and prints per task: nodes, leaves, success rate,
    /// budget used, forks, and the share of time spent forking and snapshotting.
    Rollout(Box<RolloutArgs>),
    /// Serve the HTTP API (server/API.md) on a Unix socket and/or TCP: the
    /// door for Python and RL frameworks (`pip install ./clients/python`).
    ///
    /// Prints `arbor serve: listening on ...` to stderr when ready; SIGTERM
    /// stops it (in-flight requests get --grace seconds, then every sandbox
    /// is closed); SIGHUP re-reads --tokens.
    Serve(Box<ServeArgs>),
    /// Credit of rollout trees: Q̂, V̂, advantages per edge; export them for a
    /// trainer, same-state preference pairs for DPO, and a plot.
    ///
    /// `arbor credit eval` instead computes exact ground-truth credit on
    /// tasks and scores credit estimators against it (see `arbor credit
    /// eval --help`).
    Credit(Box<CreditArgs>),
    /// Train the default policy network (needs the `train` feature, on in
    /// the Makefile targets): attached training with checkpoints, offline
    /// PPO from exported advantage records, or the three-arm comparison.
    Train(Box<TrainArgs>),
    /// Tasks: list, show, validate, and run actions against one.
    Task {
        /// The task folder [default: $ARBOR_TASKS, else the bundled envs/tasks].
        #[arg(long, global = true, value_name = "DIR")]
        tasks: Option<PathBuf>,
        /// What to do.
        #[command(subcommand)]
        command: TaskCommand,
    },
}

/// `arbor rollout`: grow rollout trees by forking real snapshots.
#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    /// One task.
    #[arg(
        long,
        value_name = "ID",
        conflicts_with = "split",
        required_unless_present = "split"
    )]
    pub task: Option<String>,
    /// Every task of a split: train, heldout-variants, heldout-families or
    /// upstream.
    #[arg(long, value_name = "S")]
    pub split: Option<String>,
    /// The behaviour policy: random, gold, mixture, mixture:P, command:CMD,
    /// or openai:URL[?OPTIONS][#MODEL] (a model behind an OpenAI-compatible
    /// server; options: temperature, top_p, max_tokens, concurrency,
    /// timeout_s, retries, context_tokens, system, tokenizer, extensions).
    #[arg(long, value_name = "P", default_value = "mixture")]
    pub policy: String,
    /// Where to branch: uniform[:WIDTH[:EVERY]], entropy[:NATS[:WIDTH]],
    /// uncertainty[:INITIAL], independent[:EPISODES].
    #[arg(long = "branch", value_name = "STRATEGY", default_value = "uniform")]
    pub strategy: String,
    /// Executed actions plus verifier runs, per task.
    #[arg(long, value_name = "N", default_value_t = 60)]
    pub budget: u64,
    /// Paths running at once [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Seed of every sampling decision.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Where to write the trees (JSON, schema arbor.rollout-forest/1).
    #[arg(long, value_name = "TREE")]
    pub out: PathBuf,
    /// The task folder [default: $ARBOR_TASKS, else the bundled envs/tasks].
    #[arg(long, value_name = "DIR")]
    pub tasks: Option<PathBuf>,
}

/// `arbor credit TREE [...]`, or `arbor credit eval [...]`.
#[derive(Debug, clap::Args)]
#[command(subcommand_negates_reqs = true)]
pub struct CreditArgs {
    /// `eval`: exact ground-truth credit.
    #[command(subcommand)]
    pub command: Option<CreditCommand>,
    /// A trees file written by `arbor rollout` (or its stored copy, rollout.KEY).
    #[arg(required = true)]
    pub tree: Option<PathBuf>,
    /// Write one advantage record per edge (JSON lines, schema arbor.advantage-record/2).
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
    /// Write the records for a trainer, to --out: jsonl (advantage records),
    /// verl (Parquet), skyrl (GeneratorOutput JSON), verifiers (message
    /// graph JSON), trl (rollout_func dict JSON). One sample per edge.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<arbor_envs::rollout::export::formats::Format>,
    /// Where --format writes.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// How --format scales advantages: none, state (by the deviation at each
    /// state) or batch (by the deviation over the export).
    #[arg(long, value_name = "HOW", default_value = "none", value_parser = parse_normalise)]
    pub normalise: arbor_envs::rollout::export::formats::Normalise,
    /// Write same-state preference pairs (JSON lines: prompt, chosen, rejected).
    #[arg(long, value_name = "FILE")]
    pub pairs: Option<PathBuf>,
    /// Draw the first tree as SVG (Q̂ on edges, verdicts on leaves).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Smallest Q̂ difference for a preference pair.
    #[arg(long, value_name = "M", default_value_t = 0.2)]
    pub margin: f64,
    /// Discount.
    #[arg(long, value_name = "G", default_value_t = 1.0)]
    pub gamma: f64,
}

fn parse_format(s: &str) -> Result<arbor_envs::rollout::export::formats::Format, String> {
    s.parse()
}

fn parse_normalise(s: &str) -> Result<arbor_envs::rollout::export::formats::Normalise, String> {
    s.parse()
}

impl CreditArgs {
    /// Reject a trees file, or its options, given together with `eval`
    /// (clap accepts both: global flags may come before the subcommand, so
    /// arguments cannot be made to conflict with it).
    ///
    /// # Errors
    /// What was given that `eval` does not take.
    pub fn check(&self) -> Result<(), String> {
        if self.command.is_none() {
            return match (&self.format, &self.out) {
                (Some(_), None) => Err("--format needs --out PATH".to_owned()),
                (None, Some(_)) => {
                    Err("--out needs --format (jsonl, verl, skyrl, verifiers, trl)".to_owned())
                }
                _ => Ok(()),
            };
        }
        let given: Vec<&str> = [
            ("a trees file", self.tree.is_some()),
            ("--export", self.export.is_some()),
            ("--pairs", self.pairs.is_some()),
            ("--plot", self.plot.is_some()),
            ("--format", self.format.is_some()),
            ("--out", self.out.is_some()),
        ]
        .into_iter()
        .filter_map(|(what, given)| given.then_some(what))
        .collect();
        if given.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "`credit eval` does not take {}: that belongs to `credit TREE`",
                given.join(", ")
            ))
        }
    }
}

/// Subcommands of `arbor credit`.
#[derive(Debug, Subcommand)]
pub enum CreditCommand {
    /// Exact ground-truth credit: explore every state a task reaches under
    /// its candidate actions (memoised by content hash), compute Q^π and
    /// A^π of a Markov policy by dynamic programming, replay credit
    /// estimators (GRPO, Dr.GRPO, RLOO, uniform/entropy/uncertainty
    /// branching, VinePPO, RTMC) from the cache at each budget and seed, and
    /// score them: MSE, decisive sign accuracy, sibling ranking accuracy,
    /// policy-gradient cosine, and the budget each needs for 90% sign
    /// accuracy. A few tasks are also checked against live driver trees.
    ///
    /// Writes report.json, report.md and sign-accuracy.png into --out.
    /// The snapshots exploration takes are left untagged (`arbor gc` frees
    /// them). Needs the `train` feature (it links libtorch).
    Eval(Box<CreditEvalArgs>),
}

/// `arbor credit eval`.
#[derive(Debug, clap::Args)]
pub struct CreditEvalArgs {
    /// Tasks, comma-separated [default: 12 training tasks of every family
    /// that fit exact exploration; with --quick, py-stats-1 and data-trap-1].
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ID,...",
        conflicts_with = "split"
    )]
    pub tasks: Option<Vec<String>>,
    /// Every task of a split (train, heldout-variants, heldout-families, upstream).
    #[arg(long, value_name = "S")]
    pub split: Option<String>,
    /// Budgets (actions + verifier runs), comma-separated, increasing
    /// [default: 30,60,120,240,480; with --quick, 30,120].
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub budgets: Option<Vec<u64>>,
    /// Seeds per estimator and budget [default: 50; with --quick, 20].
    #[arg(long, value_name = "N")]
    pub seeds: Option<usize>,
    /// The small version: two small tasks, budgets 30 and 120, 20 seeds.
    #[arg(long)]
    pub quick: bool,
    /// Where report.json, report.md and the chart go.
    #[arg(long, value_name = "DIR", default_value = "target/credit-eval")]
    pub out: PathBuf,
    /// Seed of the Markov policy's network [default: 1].
    #[arg(long, value_name = "S")]
    pub policy_seed: Option<u64>,
    /// Behaviour-cloning epochs on each task's gold decisions (one Adam step
    /// each) [default: 30].
    #[arg(long, value_name = "E")]
    pub bc_epochs: Option<usize>,
    /// Softmax temperature of the policy [default: 1].
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
    /// Uniform share ε of the policy, so every action has probability > 0 [default: 0.1].
    #[arg(long, value_name = "EPS")]
    pub epsilon: Option<f64>,
    /// Rollouts per state of the VinePPO-style estimator [default: 4].
    #[arg(long, value_name = "K")]
    pub vine_k: Option<usize>,
    /// Tasks (the first ones) checked against a live driver tree [default: 3; with --quick, 1].
    #[arg(long, value_name = "N")]
    pub validate: Option<usize>,
    /// Largest number of states a task may have [default: 20000].
    #[arg(long, value_name = "N")]
    pub max_states: Option<usize>,
    /// Sandboxes running at once while exploring [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// The task folder [default: $ARBOR_TASKS, else the bundled envs/tasks].
    #[arg(long, value_name = "DIR")]
    pub task_dir: Option<PathBuf>,
}

/// `arbor train`.
#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Run the experiment: GRPO, branch-point PPO with segment credit and
    /// VinePPO-style Monte Carlo, all from the same behaviour cloning, at an
    /// equal environment budget; success scored exactly on the training tasks,
    /// a validation split carved from train and the held-out variants.
    #[arg(long)]
    pub compare: bool,
    /// With --compare: the labelled smoke version (one seed per arm, a small budget).
    #[arg(long, requires = "compare")]
    pub smoke: bool,
    /// Seeds, comma-separated (default: 1,2,3 for --compare, 1 otherwise).
    #[arg(long, value_delimiter = ',', value_name = "S,...")]
    pub seeds: Option<Vec<u64>>,
    /// Environment budget (actions + verifier runs) per arm and seed, or for this run.
    #[arg(long, value_name = "N")]
    pub budget: Option<u64>,
    /// Train offline from exported advantage records (`arbor credit --export`).
    #[arg(long, value_name = "FILE", conflicts_with = "compare")]
    pub records: Option<PathBuf>,
    /// Checkpoint directory: written at the end (weights, optimiser state, counters, curve).
    #[arg(long, value_name = "DIR", conflicts_with = "compare")]
    pub checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint in --checkpoint.
    #[arg(long, requires = "checkpoint")]
    pub resume: bool,
    /// Where reports, plots and checkpoints of --compare go.
    #[arg(long, value_name = "DIR", default_value = "target/arbor-train")]
    pub out: PathBuf,
    /// Rollout workers [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// With --compare: Adam learning rate of the RL phases [default: 1e-3].
    /// Choose it by the report's validation column, never the held-out one.
    #[arg(long, value_name = "LR", requires = "compare")]
    pub rl_lr: Option<f64>,
    /// The task folder [default: $ARBOR_TASKS, else the bundled envs/tasks].
    #[arg(long, value_name = "DIR")]
    pub tasks: Option<PathBuf>,
}

/// `arbor task ...`.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// List the tasks (id, family, group, difficulty, split).
    List {
        /// Only this split: train, heldout-variants, heldout-families,
        /// upstream or code-interpreter.
        #[arg(long, value_name = "S")]
        split: Option<String>,
    },
    /// Show one task: instructions, limits, paths, candidates, checks.
    Show {
        /// The task id.
        id: String,
    },
    /// Validate tasks: gold scores 1, no-op, mutated gold, single candidates
    /// and every canary score 0, git history is clean.
    ///
    /// Each DIR is a task directory (with task.toml) or a suite (with
    /// manifest.toml, whose splits are checked too). Exits 1 if any task fails.
    Validate {
        /// Task or suite directories [default: the task folder].
        dirs: Vec<PathBuf>,
        /// Tasks validated at once [default: the number of CPUs].
        #[arg(long, short = 'j', value_name = "N")]
        jobs: Option<usize>,
    },
    /// Run free-form actions against a task from its root snapshot and print
    /// each step and the verdict.
    ///
    /// FILE holds a JSON array of actions (`{"exec": "ls"}`, `{"write":
    /// "a.py", "content": "..."}`, `{"delete": "a.py"}`), or TOML with
    /// `[[action]]` tables of the same fields.
    Run {
        /// The task id.
        id: String,
        /// The actions file.
        #[arg(long, value_name = "FILE")]
        actions: PathBuf,
    },
    /// Import SWE-bench instances as task directories (family `upstream`,
    /// pytest checks).
    ///
    /// INSTANCES holds one JSON object a line: instance_id, repo
    /// (owner/name), base_commit, patch, test_patch, FAIL_TO_PASS,
    /// PASS_TO_PASS (lists, or JSON strings of lists), and optionally
    /// problem_statement, pre_install and install (kept as comments). The
    /// repository of `owner/name` is the git clone DIR/owner__name (--repo-dir
    /// DIR). Each task is written to OUT/<id>, the id being the instance id in
    /// lower case with other characters than a-z0-9 made `-`. If any instance
    /// fails, nothing is written.
    ImportSwe {
        /// The instances file (JSON lines).
        instances: PathBuf,
        /// The folder holding the clones (owner__name each).
        #[arg(long, value_name = "DIR")]
        repo_dir: PathBuf,
        /// An image name (`image = "NAME"`), or a TOML file whose `[image]`
        /// recipe table is copied into each task.toml [default: none].
        #[arg(long, value_name = "IMAGE")]
        image: Option<String>,
        /// The folder the task directories are written into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// Parse a positive number of seconds.
fn parse_timeout(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 * 365.0 {
        Ok(secs)
    } else {
        Err(format!(
            "{text:?}: the timeout must be more than 0 seconds and at most a year"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn exec_takes_the_command_after_the_separator() {
        let cli = Cli::try_parse_from([
            "arbor", "--home", "/h", "exec", "base", "--commit", "--", "echo", "-n", "x",
        ])
        .unwrap();
        match cli.command {
            Command::Exec {
                snapshot,
                commit,
                command,
                timeout,
                tag,
                allow_host,
            } => {
                assert!(allow_host.is_empty());
                assert_eq!(snapshot, "base");
                assert!(commit);
                assert_eq!(command, ["echo", "-n", "x"]);
                assert!((timeout - DEFAULT_TIMEOUT_S).abs() < f64::EPSILON);
                assert_eq!(tag, None);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from(["arbor", "exec", "base", "--tag", "t", "--", "true"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["arbor", "exec", "base", "--timeout", "0", "--", "true"]).is_err()
        );
        assert!(Cli::try_parse_from(["arbor", "exec", "base"]).is_err());
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["arbor", "ls", "--json", "--home", "/x"]).unwrap();
        assert!(cli.json);
        assert_eq!(cli.home, Some(PathBuf::from("/x")));
    }

    #[test]
    fn credit_takes_a_trees_file_or_the_eval_subcommand() {
        let cli =
            Cli::try_parse_from(["arbor", "credit", "trees.json", "--export", "a.jsonl"]).unwrap();
        match cli.command {
            Command::Credit(c) => {
                assert!(c.command.is_none());
                assert_eq!(c.tree, Some(PathBuf::from("trees.json")));
                assert_eq!(c.export, Some(PathBuf::from("a.jsonl")));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from([
            "arbor",
            "credit",
            "eval",
            "--quick",
            "--budgets",
            "30,60",
            "--tasks",
            "py-stats-1,config-fix-1",
            "--json",
        ])
        .unwrap();
        assert!(cli.json);
        match cli.command {
            Command::Credit(c) => match c.command {
                Some(CreditCommand::Eval(e)) => {
                    assert!(e.quick);
                    assert_eq!(e.budgets, Some(vec![30, 60]));
                    assert_eq!(
                        e.tasks,
                        Some(vec!["py-stats-1".to_owned(), "config-fix-1".to_owned()])
                    );
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        // Global flags go anywhere, before the subcommand too.
        let cli = Cli::try_parse_from(["arbor", "credit", "--json", "eval", "--quick"]).unwrap();
        assert!(cli.json);
        assert!(matches!(
            cli.command,
            Command::Credit(c) if matches!(c.command, Some(CreditCommand::Eval(_)))
        ));
        // A trees file is required without the subcommand, and the two do not mix.
        assert!(Cli::try_parse_from(["arbor", "credit"]).is_err());
        for mixed in [
            &["arbor", "credit", "t.json", "eval"][..],
            &["arbor", "credit", "--export", "a.jsonl", "eval"][..],
        ] {
            match Cli::try_parse_from(mixed).map(|c| c.command) {
                Ok(Command::Credit(c)) => {
                    let err = c.check().unwrap_err();
                    assert!(err.contains("`credit eval` does not take"), "{err}");
                }
                Err(_) => {}
                Ok(other) => panic!("{other:?}"),
            }
        }
        match Cli::try_parse_from(["arbor", "credit", "eval"]).map(|c| c.command) {
            Ok(Command::Credit(c)) => assert!(c.check().is_ok()),
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from([
                "arbor", "credit", "eval", "--tasks", "a", "--split", "train"
            ])
            .is_err()
        );
    }

    #[test]
    fn tag_delete_excludes_positionals() {
        assert!(Cli::try_parse_from(["arbor", "tag", "--delete", "t"]).is_ok());
        assert!(Cli::try_parse_from(["arbor", "tag", "snap", "--delete", "t"]).is_err());
    }
}

/// `arbor serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen on this Unix socket (the default for local use).
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// Listen on this TCP address, e.g. 127.0.0.1:7800 (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// Tenants' bearer tokens, one `name token` per line (re-read on
    /// SIGHUP); without it there is one tenant that needs no token.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// The task suite [default: the bundled one].
    #[arg(long, value_name = "DIR")]
    pub tasks: Option<PathBuf>,
    /// Live sandboxes per tenant (a hard cap; past it: 429 with Retry-After).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_sandboxes: usize,
    /// Sandbox creations per second per tenant [default: unlimited].
    #[arg(long, value_name = "R")]
    pub creates_per_second: Option<f64>,
    /// Default sandbox TTL in seconds (a sandbox past it is closed).
    #[arg(long, value_name = "S", default_value_t = 3600.0)]
    pub ttl: f64,
    /// Longest TTL a client may ask for, in seconds.
    #[arg(long, value_name = "S", default_value_t = 86400.0)]
    pub max_ttl: f64,
    /// Largest request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub max_body: usize,
    /// Seconds in-flight requests get to finish on SIGTERM.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub grace: f64,
}

/// Subcommands of `arbor bundle`.
#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Write the closure of snapshots (their parent chains, layers, blobs,
    /// session pages and images) as one bundle, each object and file once.
    Export {
        /// Snapshot ids, unique id prefixes, or tags (a tag travels with its snapshot).
        #[arg(required = true, value_name = "SNAP")]
        snapshots: Vec<String>,
        /// The bundle file, or `-` for stdout. An existing file is left alone.
        #[arg(long, value_name = "FILE|-")]
        out: String,
        /// Leave out everything these snapshots' closures hold: the
        /// importing store must have them (repeatable).
        #[arg(long, value_name = "BASE")]
        since: Vec<String>,
    },
    /// Import a bundle: every byte is verified and nothing is stored unless
    /// the whole bundle checks out; what this store has is skipped.
    Import {
        /// The bundle file, or `-` for stdin.
        #[arg(value_name = "FILE|-")]
        file: String,
    },
}

/// Subcommands of `arbor remote`.
#[derive(Debug, Subcommand)]
pub enum RemoteCommand {
    /// Add a remote: `arbor remote add origin s3://bucket/prefix --endpoint URL`.
    Add {
        /// Its name.
        name: String,
        /// `s3://bucket[/prefix]`.
        url: String,
        /// The S3 endpoint (`http://127.0.0.1:9000`) [default: AWS's].
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// The region [default: $AWS_REGION, else us-east-1].
        #[arg(long)]
        region: Option<String>,
    },
    /// The remotes of this store.
    List,
    /// Forget a remote (what was pushed there stays).
    Remove {
        /// Its name.
        name: String,
    },
    /// What a remote holds: pushed snapshots, tags, objects and bytes.
    Show {
        /// Its name.
        name: String,
    },
}

/// Subcommands of `arbor image`.
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Import an OCI image layout directory, an oci-archive or a
    /// docker-archive tarball (`podman save`, `docker save`, `skopeo copy`).
    /// Every digest is verified; nothing is stored if any check fails.
    Import {
        /// The directory or tarball.
        file: PathBuf,
        /// The image's name [default: the archive's own, else image-<id>].
        #[arg(long, value_name = "NAME")]
        tag: Option<String>,
        /// Refuse a layer with more bytes of files than this (e.g. 8G).
        #[arg(long, value_name = "BYTES", default_value = "16G", value_parser = crate::args::parse_bytes)]
        max_layer_bytes: u64,
    },
    /// Build an image from Debian's packages (mmdebstrap), then pip
    /// requirements, then commands, each step one layer, each run in a
    /// sandbox on the image so far (egress only to pip's index for --pip, to
    /// --allow-host for --run). Every step is cached by the recipe up to it:
    /// building the same recipe again is a lookup.
    Build {
        /// The Debian suite (bookworm, trixie, ...).
        #[arg(long, value_name = "SUITE", required_unless_present = "recipe")]
        debian: Option<String>,
        /// Debian packages to install (comma-separated, repeatable).
        #[arg(long, value_name = "PKG,...", value_delimiter = ',')]
        packages: Vec<String>,
        /// pip requirements, NAME==VERSION (comma-separated, repeatable).
        #[arg(long, value_name = "REQ,...", value_delimiter = ',')]
        pip: Vec<String>,
        /// A shell command run as root on the image, its own layer (repeatable, in order).
        #[arg(long = "run", value_name = "CMD")]
        run: Vec<String>,
        /// Host names the --run steps may reach through the egress proxy.
        #[arg(long = "allow-host", value_name = "HOST,...", value_delimiter = ',')]
        allow_host: Vec<String>,
        /// A TOML recipe (an `[image]` table, as in task.toml) instead of the flags above.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["debian", "packages", "pip", "run", "allow_host"])]
        recipe: Option<PathBuf>,
        /// The image's name.
        #[arg(long, value_name = "NAME")]
        tag: String,
    },
    /// List the named images.
    Ls,
    /// Show an image's layers and configuration.
    Show {
        /// Name, id or unique id prefix.
        image: String,
    },
    /// Remove an image's name (its layers stay while snapshots use it; `gc` frees the rest).
    Rm {
        /// The name.
        image: String,
    },
}

/// Parse a byte count with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a byte count: {s:?} (e.g. 512M, 8G)"))
}
