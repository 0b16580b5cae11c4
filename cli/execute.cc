// stepcast execute SCENARIO [--backend B] [--steps N] [--warmup N] [--scale-down F] [--no-verify] [--out DIR] [--json]
//   --train [--layout L] [--checkpoint-every K] [--keep K] [--async] [--omit PARTS] [--resume DIR] [--crash POINT]
//   --resume-check N [--layout L] [--reshard-to L] [--omit PARTS] [--tolerance X]
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "stepcast/app/execute.h"
#include "stepcast/app/train.h"

namespace stepcast::cli {

namespace {

// The resume check's launcher: `$STEPCAST_MPIEXEC` (default mpirun) -np N this binary ARGS,
// in new processes, waiting for them. --oversubscribe when N exceeds the cores.
int mpirun_launch(int ranks, const std::vector<std::string>& args) {
  char self[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 127;
  const char* mpiexec = std::getenv("STEPCAST_MPIEXEC");
  std::vector<std::string> argv = {mpiexec && *mpiexec ? mpiexec : "mpirun", "-np", std::to_string(ranks)};
  if (static_cast<unsigned>(ranks) > std::thread::hardware_concurrency()) argv.push_back("--oversubscribe");
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    // The runs' own reports are not the check's: only their errors are shown.
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(127);
    std::vector<char*> c;
    for (std::string& s : argv) c.push_back(s.data());
    c.push_back(nullptr);
    execvp(c[0], c.data());
    std::fprintf(stderr, "stepcast: error: cannot run %s: %s\n", c[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Command add_execute(CLI::App& app) {
  struct Args {
    app::ExecuteRequest request;
    app::TrainRequest train_request;
    bool train = false;
    int resume_check = 0;
    std::string reshard_to, omit;
    double tolerance = 1e-4;
    bool no_verify = false;
    bool json = false;
    bool out_given = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("execute", "Run the scenario's plan for real (MPI ranks or GPUs), measure, write the trace");
  sub->add_option("SCENARIO", a->request.scenario, "Scenario JSON file")->required();
  sub->add_option("--backend", a->request.backend, "cpu_mpi (default) or cuda_nccl");
  sub->add_option("--steps", a->request.steps, "Measured steps (default 3; with --train: optimizer steps, default 20)");
  sub->add_option("--warmup", a->request.warmup, "Warm-up steps before measuring (default 1)");
  sub->add_option("--scale-down", a->request.scale_down,
                  "Divide hidden size, heads, FFN, vocabulary and layers by F, keeping the plan's structure");
  sub->add_flag("--no-verify", a->no_verify, "Do not check collective results");
  sub->add_option("--out", a->request.out, "Directory for measured.json and trace.json (default stepcast-execute)");
  sub->add_flag("--json", a->json, "Print the measurement JSON");
  const char* group = "Training and checkpoints (docs/checkpoints.md)";
  sub->add_flag("--train", a->train, "Train the model for real (cpu_mpi): losses, checkpoints, params.bin")->group(group);
  sub->add_option("--layout", a->train_request.layout, "Override the plan's layout: tp=2,dp=2,zero=1")->group(group);
  sub->add_option("--checkpoint-every", a->train_request.checkpoint_every, "Save every K steps (default 0: never)")
      ->group(group);
  sub->add_option("--checkpoint-dir", a->train_request.checkpoint_dir, "Checkpoint directory (default OUT/checkpoints)")
      ->group(group);
  sub->add_option("--keep", a->train_request.keep, "Complete generations kept (default 2)")->group(group);
  sub->add_flag("--async", a->train_request.async, "Snapshot to host memory, write in the background")->group(group);
  sub->add_option("--omit", a->omit, "Leave parts out of the save: sampler,rng,scheduler,optimizer,...")->group(group);
  sub->add_option("--resume", a->train_request.resume, "Resume from the newest loadable generation in DIR")->group(group);
  sub->add_option("--crash", a->train_request.crash, "Fault injection: POINT[:RANK][@GEN][+BYTES] (kill -9 there)")
      ->group(group);
  sub->add_option("--lr", a->train_request.lr, "Peak learning rate (default 3e-3)")->group(group);
  sub->add_option("--dropout", a->train_request.dropout, "Dropout probability (default 0.1)")->group(group);
  sub->add_option("--resume-check", a->resume_check,
                  "Run 2N steps straight and N + save + restore (new processes) + N; compare")
      ->group(group);
  sub->add_option("--reshard-to", a->reshard_to, "With --resume-check: resume on another layout (tp=1,dp=2)")->group(group);
  sub->add_option("--tolerance", a->tolerance, "With --resume-check and --reshard-to: relative loss tolerance (1e-4)")
      ->group(group);
  return {sub, [a, sub] {
            std::vector<StatePart> omit;
            if (!a->omit.empty()) {
              auto parts = app::parse_state_parts(a->omit, "--omit");
              if (!parts.ok()) return input_error(parts.error().message);
              omit = *parts;
            }
            const bool out_given = sub->count("--out") > 0;
            if (a->resume_check != 0 || sub->count("--resume-check") > 0) {
              app::ResumeCheckRequest q;
              q.scenario = a->request.scenario;
              q.n = a->resume_check;
              q.layout = a->train_request.layout;
              q.reshard_to = a->reshard_to;
              q.omit = omit;
              q.scale_down = a->request.scale_down;
              q.tolerance = a->tolerance;
              if (out_given) q.out = a->request.out;
              Progress progress("stepcast execute --resume-check");
              progress.status("three training runs (straight, first half + save, resumed half)");
              auto r = app::run_resume_check(q, mpirun_launch);
              progress.clear();
              if (!r.ok()) return input_error(r.error().message);
              // Nothing omitted: the resume must be exact (or within tolerance after a
              // reshard). Parts omitted: the check is that the audit predicts the outcome.
              const bool ok = omit.empty() ? r->pass : r->audit_agrees;
              const int code = ok ? kExitOk : kExitFailed;
              return print(a->json ? app::resume_check_json(*r) : app::resume_check_text(*r), code);
            }
            if (a->train) {
              app::TrainRequest t = a->train_request;
              t.scenario = a->request.scenario;
              t.backend = a->request.backend;
              t.scale_down = a->request.scale_down;
              t.steps = sub->count("--steps") > 0 ? a->request.steps : 20;
              t.omit = omit;
              if (out_given) t.out = a->request.out;
              Progress progress("stepcast execute --train: steps");
              t.progress = progress.callback();
              auto r = app::run_train(t);
              progress.clear();
              if (!r.ok()) return r.error().message.empty() ? kExitInput : input_error(r.error().message);
              if (!r->run_error.empty()) {
                std::fprintf(stderr, "stepcast: %s\n", r->run_error.c_str());
                return kExitFailed;
              }
              if (!r->root) return kExitOk;
              if (!write_output("--out", r->measured_path, r->measured_json) ||
                  !write_output("--out", r->params_path, r->params_bin)) {
                return kExitFailed;
              }
              return print(a->json ? app::train_json(*r) : app::train_text(*r));
            }
            a->request.verify = !a->no_verify;
            Progress progress("stepcast execute: steps");
            a->request.progress = progress.callback();
            auto r = app::run_execute(a->request);
            progress.clear();
            if (!r.ok()) return r.error().message.empty() ? kExitInput : input_error(r.error().message);
            if (!r->run_error.empty()) {
              std::fprintf(stderr, "stepcast: %s\n", r->run_error.c_str());
              return kExitFailed;
            }
            if (!r->root) return r->failed() ? kExitFailed : kExitOk;
            if (!write_output("--out", r->measured_path, r->measured_json) ||
                !write_output("--out", r->trace_path, r->trace_json)) {
              return kExitFailed;
            }
            return print(a->json ? app::execute_json(*r) : app::execute_text(*r), r->failed() ? kExitFailed : kExitOk);
          }};
}

}  // namespace stepcast::cli
