// The Studio's background work, in the manner of ImHex's task manager: a job is submitted with a
// name, runs off the UI thread, reports its progress (a fraction and a line of text), can be
// cancelled cooperatively, and its outcome (a value, an error or "cancelled") is handed back on
// the thread that calls poll() — the UI thread, once per frame — never on a worker. So the panels
// never wait on a read, a render or the disk, and they touch their own state only on the UI thread.
//
// Where a job runs: the pool (several threads, for capture reads, analyses, thumbnails and
// exports), or a lane: one thread of its own that runs that lane's jobs one at a time in the order
// they were submitted. The RunController's model is owned by the "model" lane (one thread loads it, runs
// prefill and decode, opens captures); saves go to the "io" lane and map windows to the "maps"
// lane, so a long analysis on the pool never holds up the map.
//
// No GUI code here: the RunController (headless, tests) uses it too.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace luka::studio {

// Thrown by TaskContext::check() when the task was cancelled; the task's outcome is "cancelled".
struct TaskCancelled : std::exception {
  const char* what() const noexcept override { return "cancelled"; }
};

class TaskManager;
namespace detail {
struct TaskState;
// T, where a template argument is not to be deduced (submit's T comes from the job alone).
template <class T>
struct SameAs {
  using type = T;
};
template <class T>
using Same = typename SameAs<T>::type;
}  // namespace detail

// What a running job sees of its task. Safe to use from the job's thread only.
class TaskContext {
 public:
  bool cancelled() const;
  void check() const;  // throws TaskCancelled once cancel() was asked for
  // 0..1, or < 0 while the job cannot tell; `text` says what it is doing ("" keeps the last text).
  void progress(double fraction, const std::string& text = "");
  // The flag cancel() sets, for code that polls an atomic (capture::SaveOptions::cancel).
  const std::atomic<bool>* cancel_flag() const;

 private:
  friend class TaskManager;
  explicit TaskContext(detail::TaskState& s) : s_(s) {}
  detail::TaskState& s_;
};

// A job's outcome, handed to its `done` callback on the polling thread: exactly one of a value, an
// error (the first line of what it threw) or cancelled.
template <class T>
struct TaskResult {
  std::optional<T> value;
  std::string error;
  bool cancelled = false;
  bool ok() const { return value.has_value(); }
};

// TaskResult<void> has no value: a void job's outcome is only its error or cancellation.
template <>
struct TaskResult<void> {
  std::string error;
  bool cancelled = false;
  bool ok() const { return error.empty() && !cancelled; }
};

struct TaskOptions {
  std::string lane;           // "": the pool; else the lane's own thread (created at its first job)
  bool listed = true;         // shown in the Studio's list of background work (the model panel shows the model's own)
  bool cancellable = true;    // the list offers Cancel
  std::function<void()> on_cancel;  // called once, on the cancelling thread, when cancel() is asked for
};

// A task as the list of background work shows it.
struct TaskInfo {
  std::uint64_t id = 0;
  std::string name, lane, text;
  double fraction = -1;  // < 0: unknown
  bool running = false;  // started (else waiting for its thread)
  bool listed = true, cancellable = true, cancelling = false;
  double seconds = 0;    // since it was submitted
};

// The submitter's handle on a task (copies share it; an empty handle is !valid()).
class Task {
 public:
  Task() = default;
  bool valid() const { return s_ != nullptr; }
  std::uint64_t id() const;
  // The job has run (or was skipped, cancelled before it started); its outcome may still wait for
  // poll().
  bool finished() const;
  void cancel() const;
  bool cancelled() const;
  double fraction() const;
  std::string text() const;
  // Blocks until finished(). Only for shutdown, where an owner must outlive the jobs that use it;
  // the UI never waits.
  void wait() const;

 private:
  friend class TaskManager;
  explicit Task(std::shared_ptr<detail::TaskState> s) : s_(std::move(s)) {}
  std::shared_ptr<detail::TaskState> s_;
};

namespace detail {
struct TaskState {
  std::uint64_t id = 0;
  std::string name;
  TaskOptions options;
  std::chrono::steady_clock::time_point submitted;
  std::atomic<bool> cancel{false};
  std::atomic<bool> cancel_called{false};
  mutable std::mutex mu;
  std::condition_variable cv;
  double fraction = -1;
  std::string text;
  bool running = false, finished = false;
  std::string error;       // the outcome, besides a value
  bool cancelled = false;
  std::function<void(TaskContext&)> run;  // on the worker; stores a value where deliver finds it
  std::function<void()> deliver;          // on the polling thread (empty: nothing to hand back)
};
}  // namespace detail

class TaskManager {
 public:
  static constexpr int kAuto = 0;
  // `pool_threads` workers for the pool (kAuto: the cores, at least 4 and at most 8).
  explicit TaskManager(int pool_threads = kAuto);
  // Cancels every task, waits for the running jobs to return and drops the outcomes not yet
  // handed back (their callbacks are not called).
  ~TaskManager();
  TaskManager(const TaskManager&) = delete;
  TaskManager& operator=(const TaskManager&) = delete;

  // Runs `work(TaskContext&)` (returning T, or void) in the background; `done(TaskResult<T>)`
  // runs later on the thread that calls poll(). A job that throws gives an error outcome; one that
  // throws TaskCancelled, or finishes after cancel(), a cancelled one.
  template <class Work, class T = std::invoke_result_t<Work, TaskContext&>>
  Task submit(std::string name, Work work, std::function<void(TaskResult<detail::Same<T>>)> done = {}, TaskOptions options = {});

  // Hands the outcomes of finished tasks to their callbacks, in the order the tasks finished (for
  // one lane: the order they were submitted), on the calling thread. Returns how many.
  std::size_t poll();

  // Tasks submitted and not yet handed back by poll() (or, without a callback, not yet finished);
  // with `lane`, only that lane's ("" : the pool's).
  std::size_t unfinished() const;
  std::size_t unfinished(const std::string& lane) const;
  // The tasks waiting or running, oldest first.
  std::vector<TaskInfo> list() const;
  // Cancels the task with this id (the list's Cancel button); false when it is gone.
  bool cancel(std::uint64_t id);

  // Scripts and tests: while held, the pool starts no new job (lanes go on), so that the list of
  // background work can be looked at.
  void hold_pool(bool held);
  bool pool_held() const;

 private:
  struct Lane {
    std::deque<std::shared_ptr<detail::TaskState>> queue;
    std::vector<std::thread> threads;
  };
  Task enqueue(std::shared_ptr<detail::TaskState> s);
  void work(const std::string& lane);
  void finish(const std::shared_ptr<detail::TaskState>& s);

  int pool_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false, held_ = false;
  std::uint64_t next_id_ = 1;
  std::map<std::string, Lane> lanes_;
  std::vector<std::shared_ptr<detail::TaskState>> live_;      // submitted, not yet handed back
  std::deque<std::shared_ptr<detail::TaskState>> finished_;   // waiting for poll()
};

// The first line of an exception's message (what an error outcome and a status line show).
std::string first_line(const std::string& what);

template <class Work, class T>
Task TaskManager::submit(std::string name, Work work, std::function<void(TaskResult<detail::Same<T>>)> done, TaskOptions options) {
  auto s = std::make_shared<detail::TaskState>();
  s->name = std::move(name);
  s->options = std::move(options);
  if constexpr (std::is_void_v<T>) {
    s->run = [work = std::move(work)](TaskContext& ctx) mutable { work(ctx); };
    if (done) {
      s->deliver = [s = s.get(), done = std::move(done)]() {
        TaskResult<T> r;
        r.error = s->error;
        r.cancelled = s->cancelled;
        done(std::move(r));
      };
    }
  } else {
    auto value = std::make_shared<std::optional<T>>();
    s->run = [work = std::move(work), value](TaskContext& ctx) mutable { value->emplace(work(ctx)); };
    if (done) {
      s->deliver = [s = s.get(), value, done = std::move(done)]() {
        TaskResult<T> r;
        r.error = s->error;
        r.cancelled = s->cancelled;
        if (r.error.empty() && !r.cancelled) r.value = std::move(*value);
        done(std::move(r));
      };
    }
  }
  return enqueue(std::move(s));
}

// [SECTION] UI-side holders of one task's outcome

// One task at a time whose outcome the UI takes when it is ready: an export, the thumbnails, a map
// window, a cached read. start() replaces the handle (an older task's outcome is dropped); take()
// gives the outcome once, after poll() handed it over.
template <class T>
class Pending {
 public:
  template <class Work>
  void start(TaskManager& tasks, std::string name, Work work, TaskOptions options = {}) {
    slot_ = std::make_shared<Slot>();
    std::weak_ptr<Slot> slot = slot_;
    auto job = [work = std::move(work)](TaskContext& ctx) mutable -> T {
      if constexpr (std::is_invocable_v<Work&, TaskContext&>) return work(ctx);
      else return work();
    };
    task_ = tasks.submit(std::move(name), std::move(job), std::function<void(TaskResult<T>)>([slot](TaskResult<T> r) {
                           if (auto s = slot.lock()) s->result = std::move(r);
                         }),
                         std::move(options));
  }
  // Started and its outcome not yet taken.
  bool active() const { return task_.valid(); }
  std::optional<TaskResult<T>> take() {
    if (!task_.valid() || !slot_->result) return std::nullopt;
    task_ = Task();
    std::optional<TaskResult<T>> out = std::move(slot_->result);
    slot_->result.reset();
    return out;
  }
  void cancel() const {
    if (task_.valid()) task_.cancel();
  }
  const Task& task() const { return task_; }

 private:
  struct Slot {
    std::optional<TaskResult<T>> result;
  };
  std::shared_ptr<Slot> slot_ = std::make_shared<Slot>();
  Task task_;
};

}  // namespace luka::studio
