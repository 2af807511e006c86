// The Studio's task manager (app/studio/data/tasks.h): a lane runs its jobs one at a time in order and
// hands them back in that order; progress is seen while a job runs; cancel skips a queued job and
// stops a running one that looks; outcomes reach their callbacks only on the thread that polls;
// an exception is an error outcome; shutting down with jobs in flight cancels them, waits for the
// running ones and calls no callback.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app/studio/data/tasks.h"
#include "tests/process_util.h"

namespace luka::studio {
namespace {

using luka::test::wait_for;

// A door a job waits at until the test opens it.
class Gate {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  bool is_open() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

bool all_finished(const std::vector<Task>& tasks) {
  for (const Task& t : tasks)
    if (!t.finished()) return false;
  return true;
}

TEST(StudioTasks, ALaneRunsItsJobsOneAtATimeInOrderAndHandsThemBackInOrder) {
  TaskManager tasks(4);
  std::mutex mu;
  std::vector<int> ran, delivered;
  std::atomic<int> inside{0}, most{0};
  std::vector<Task> handles;
  for (int i = 0; i < 8; ++i) {
    TaskOptions o;
    o.lane = "model";
    handles.push_back(tasks.submit(
        "job " + std::to_string(i),
        [&, i](TaskContext&) {
          const int now = ++inside;
          most = std::max(most.load(), now);
          {
            std::lock_guard<std::mutex> lock(mu);
            ran.push_back(i);
          }
          --inside;
          return i * 10;
        },
        [&](TaskResult<int> r) {
          ASSERT_TRUE(r.ok());
          delivered.push_back(*r.value / 10);
        },
        o));
  }
  ASSERT_TRUE(wait_for([&] { return all_finished(handles); }, 30));
  EXPECT_EQ(most.load(), 1) << "a lane ran two jobs at once";
  EXPECT_TRUE(delivered.empty()) << "handed back before poll()";
  EXPECT_EQ(tasks.unfinished(), 8u) << "finished but not handed back: still unfinished";
  EXPECT_EQ(tasks.unfinished("model"), 8u);
  EXPECT_EQ(tasks.unfinished(""), 0u);
  EXPECT_EQ(tasks.poll(), 8u);
  const std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(ran, order);
  EXPECT_EQ(delivered, order);
  EXPECT_EQ(tasks.unfinished(), 0u);
  EXPECT_EQ(tasks.poll(), 0u);
}

TEST(StudioTasks, ProgressIsSeenWhileTheJobRuns) {
  TaskManager tasks(2);
  Gate reported, go;
  std::optional<TaskResult<std::string>> got;
  const Task t = tasks.submit(
      "reading",
      [&](TaskContext& ctx) {
        ctx.progress(0.25, "a quarter read");
        reported.open();
        go.wait();
        ctx.progress(0.75);  // the text stays
        return std::string("read");
      },
      [&](TaskResult<std::string> r) { got = std::move(r); });
  reported.wait();
  EXPECT_DOUBLE_EQ(t.fraction(), 0.25);
  EXPECT_EQ(t.text(), "a quarter read");
  const std::vector<TaskInfo> list = tasks.list();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "reading");
  EXPECT_EQ(list[0].id, t.id());
  EXPECT_TRUE(list[0].running);
  EXPECT_DOUBLE_EQ(list[0].fraction, 0.25);
  EXPECT_EQ(list[0].text, "a quarter read");
  EXPECT_GE(list[0].seconds, 0.0);
  EXPECT_FALSE(t.finished());
  go.open();
  ASSERT_TRUE(wait_for([&] { return t.finished(); }, 30));
  EXPECT_DOUBLE_EQ(t.fraction(), 0.75);
  EXPECT_EQ(t.text(), "a quarter read");
  EXPECT_TRUE(tasks.list().empty()) << "a finished task is no longer listed";
  tasks.poll();
  ASSERT_TRUE(got && got->ok());
  EXPECT_EQ(*got->value, "read");
}

TEST(StudioTasks, CancelSkipsAQueuedJobAndStopsARunningOneThatLooks) {
  TaskManager tasks(2);
  Gate started, cancelled;
  std::atomic<bool> queued_ran{false};
  std::vector<std::pair<std::string, TaskResult<int>>> out;
  const auto keep = [&](const std::string& name) { return [&out, name](TaskResult<int> r) { out.emplace_back(name, std::move(r)); }; };
  TaskOptions lane;
  lane.lane = "io";
  TaskOptions running_options = lane;
  running_options.on_cancel = [&] { cancelled.open(); };  // wakes the job below
  const Task running = tasks.submit(
      "running",
      [&](TaskContext& ctx) {
        started.open();
        cancelled.wait();
        ctx.check();  // throws: cancelled
        return 1;
      },
      std::function<void(TaskResult<int>)>(keep("running")), running_options);
  const Task queued = tasks.submit(
      "queued", [&](TaskContext&) {
        queued_ran = true;
        return 2;
      },
      std::function<void(TaskResult<int>)>(keep("queued")), lane);
  // A job that ignores cancel() and returns: its value is dropped all the same.
  Gate late_go;
  const Task late = tasks.submit(
      "late", [&](TaskContext&) {
        late_go.wait();
        return 3;
      },
      std::function<void(TaskResult<int>)>(keep("late")));
  started.wait();
  queued.cancel();
  EXPECT_TRUE(queued.cancelled());
  EXPECT_FALSE(cancelled.is_open()) << "cancelling one task touched another";
  running.cancel();
  late.cancel();
  late_go.open();
  ASSERT_TRUE(wait_for([&] { return running.finished() && queued.finished() && late.finished(); }, 30));
  EXPECT_FALSE(queued_ran) << "a job cancelled before it started ran";
  running.cancel();  // again, after it finished: nothing happens
  tasks.poll();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& [name, r] : out) {
    EXPECT_TRUE(r.cancelled) << name;
    EXPECT_FALSE(r.value) << name;
    EXPECT_TRUE(r.error.empty()) << name;
  }
}

TEST(StudioTasks, OutcomesReachTheirCallbacksOnlyOnThePollingThread) {
  TaskManager tasks(3);
  std::mutex mu;
  std::vector<std::thread::id> workers, callbacks;
  std::vector<Task> handles;
  for (int i = 0; i < 12; ++i) {
    TaskOptions o;
    o.lane = i % 3 == 0 ? "maps" : "";
    handles.push_back(tasks.submit(
        "job",
        [&](TaskContext&) {
          std::lock_guard<std::mutex> lock(mu);
          workers.push_back(std::this_thread::get_id());
          return 0;
        },
        [&](TaskResult<int>) {
          std::lock_guard<std::mutex> lock(mu);
          callbacks.push_back(std::this_thread::get_id());
        },
        o));
  }
  ASSERT_TRUE(wait_for([&] { return all_finished(handles); }, 30));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(callbacks.empty()) << "a callback ran on a worker";
  }
  // Another thread plays the UI thread.
  std::thread::id ui;
  std::thread poller([&] {
    ui = std::this_thread::get_id();
    tasks.poll();
  });
  poller.join();
  ASSERT_EQ(callbacks.size(), 12u);
  for (const auto& id : callbacks) EXPECT_EQ(id, ui);
  for (const auto& id : workers) {
    EXPECT_NE(id, ui);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(StudioTasks, AJobThatThrowsGivesAnErrorOutcome) {
  TaskManager tasks(1);
  std::optional<TaskResult<int>> number;
  std::optional<TaskResult<void>> nothing;
  const Task a = tasks.submit(
      "bad read", [](TaskContext&) -> int { throw std::runtime_error("capture.h5: truncated\n(more detail)"); },
      [&](TaskResult<int> r) { number = std::move(r); });
  const Task b = tasks.submit(
      "bad write", [](TaskContext&) { throw std::logic_error("figure.png: cannot write"); }, [&](TaskResult<void> r) { nothing = std::move(r); });
  ASSERT_TRUE(wait_for([&] { return a.finished() && b.finished(); }, 30));
  tasks.poll();
  ASSERT_TRUE(number);
  EXPECT_FALSE(number->ok());
  EXPECT_FALSE(number->cancelled);
  EXPECT_EQ(number->error, "capture.h5: truncated");
  ASSERT_TRUE(nothing);
  EXPECT_FALSE(nothing->ok());
  EXPECT_EQ(nothing->error, "figure.png: cannot write");
  // The workers go on after a throw.
  std::optional<TaskResult<int>> fine;
  const Task c = tasks.submit("fine", [](TaskContext&) { return 7; }, [&](TaskResult<int> r) { fine = std::move(r); });
  ASSERT_TRUE(wait_for([&] { return c.finished(); }, 30));
  tasks.poll();
  ASSERT_TRUE(fine && fine->ok());
  EXPECT_EQ(*fine->value, 7);
}

TEST(StudioTasks, ShutdownWithTasksInFlightCancelsWaitsAndCallsNoCallback) {
  auto tasks = std::make_unique<TaskManager>(2);
  Gate started;
  std::atomic<int> callbacks{0}, queued_ran{0}, hooks{0};
  std::atomic<bool> saw_cancel{false};
  const auto count = [&](TaskResult<int>) { ++callbacks; };
  // A pool job that runs until it is cancelled (its hook wakes it).
  Gate woken, lane_woken;
  TaskOptions looking;
  looking.on_cancel = [&] {
    ++hooks;
    woken.open();
  };
  const Task running = tasks->submit(
      "running",
      [&](TaskContext& ctx) {
        started.open();
        woken.wait();
        saw_cancel = ctx.cancelled();
        return 1;
      },
      std::function<void(TaskResult<int>)>(count), looking);
  // A lane whose first job waits for cancellation, and a job queued behind it.
  TaskOptions lane;
  lane.lane = "model";
  lane.on_cancel = [&] { lane_woken.open(); };
  Gate lane_started;
  const Task blocking = tasks->submit(
      "blocking",
      [&](TaskContext& ctx) {
        lane_started.open();
        lane_woken.wait();
        return ctx.cancelled() ? 2 : -2;
      },
      std::function<void(TaskResult<int>)>(count), lane);
  lane.on_cancel = nullptr;
  const Task queued = tasks->submit(
      "queued", [&](TaskContext&) {
        ++queued_ran;
        return 3;
      },
      std::function<void(TaskResult<int>)>(count), lane);
  // A job finished whose outcome was never polled.
  const Task done = tasks->submit("done", [](TaskContext&) { return 4; }, std::function<void(TaskResult<int>)>(count));
  started.wait();
  lane_started.wait();
  ASSERT_TRUE(wait_for([&] { return done.finished(); }, 30));
  tasks.reset();  // returns once the running jobs have seen cancel() and returned
  EXPECT_TRUE(saw_cancel);
  EXPECT_EQ(hooks.load(), 1);
  EXPECT_EQ(queued_ran.load(), 0);
  EXPECT_EQ(callbacks.load(), 0);
  for (const Task* t : {&running, &blocking, &queued, &done}) EXPECT_TRUE(t->finished());
  EXPECT_TRUE(running.cancelled());
  EXPECT_TRUE(queued.cancelled());
  queued.wait();  // returns at once
}

TEST(StudioTasks, AHeldPoolStartsNothingUntilReleasedWhileLanesGoOn) {
  TaskManager tasks(2);
  tasks.hold_pool(true);
  EXPECT_TRUE(tasks.pool_held());
  std::atomic<bool> pool_ran{false};
  const Task pooled = tasks.submit("pooled", [&](TaskContext&) {
    pool_ran = true;
    return 0;
  });
  TaskOptions lane;
  lane.lane = "maps";
  const Task laned = tasks.submit("laned", [](TaskContext&) { return 0; }, {}, lane);
  ASSERT_TRUE(wait_for([&] { return laned.finished(); }, 30));
  EXPECT_FALSE(pool_ran);
  const std::vector<TaskInfo> list = tasks.list();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "pooled");
  EXPECT_FALSE(list[0].running);
  tasks.hold_pool(false);
  ASSERT_TRUE(wait_for([&] { return pooled.finished(); }, 30));
  EXPECT_TRUE(pool_ran);
  EXPECT_EQ(tasks.unfinished(), 0u) << "tasks without a callback are done once finished";
}

TEST(StudioTasks, PendingGivesTheLatestOutcomeOnceAndDropsAReplacedOne) {
  TaskManager tasks(2);
  Pending<int> p;
  EXPECT_FALSE(p.active());
  EXPECT_FALSE(p.take());
  Gate first_go;
  p.start(tasks, "first", [&] {
    first_go.wait();
    return 1;
  });
  const Task first = p.task();
  EXPECT_TRUE(p.active());
  p.start(tasks, "second", [](TaskContext& ctx) {
    ctx.progress(0.5);
    return 2;
  });
  first_go.open();
  ASSERT_TRUE(wait_for([&] { return first.finished() && p.task().finished(); }, 30));
  EXPECT_FALSE(p.take()) << "taken before poll()";
  tasks.poll();
  const auto got = p.take();
  ASSERT_TRUE(got && got->ok());
  EXPECT_EQ(*got->value, 2) << "the replaced task's outcome came through";
  EXPECT_FALSE(p.active());
  EXPECT_FALSE(p.take());
}

}  // namespace
}  // namespace luka::studio
