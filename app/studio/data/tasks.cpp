#include "app/studio/data/tasks.h"

#include <algorithm>

namespace luka::studio {

std::string first_line(const std::string& what) {
  std::string s = what;
  if (const auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s.empty() ? "failed" : s;
}

// [SECTION] TaskContext and Task

bool TaskContext::cancelled() const { return s_.cancel.load(); }

void TaskContext::check() const {
  if (s_.cancel.load()) throw TaskCancelled();
}

void TaskContext::progress(double fraction, const std::string& text) {
  std::lock_guard<std::mutex> lock(s_.mu);
  s_.fraction = fraction < 0 ? -1 : std::min(fraction, 1.0);
  if (!text.empty()) s_.text = text;
}

const std::atomic<bool>* TaskContext::cancel_flag() const { return &s_.cancel; }

std::uint64_t Task::id() const { return s_ ? s_->id : 0; }

bool Task::finished() const {
  if (!s_) return true;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->finished;
}

void Task::cancel() const {
  if (!s_) return;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->finished) return;
  }
  s_->cancel = true;
  if (!s_->cancel_called.exchange(true) && s_->options.on_cancel) s_->options.on_cancel();
}

bool Task::cancelled() const { return s_ && s_->cancel.load(); }

double Task::fraction() const {
  if (!s_) return -1;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->fraction;
}

std::string Task::text() const {
  if (!s_) return "";
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->text;
}

void Task::wait() const {
  if (!s_) return;
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->cv.wait(lock, [&] { return s_->finished; });
}

// [SECTION] TaskManager

TaskManager::TaskManager(int pool_threads)
    : pool_threads_(pool_threads > 0 ? pool_threads : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 4u, 8u))) {}

TaskManager::~TaskManager() {
  std::vector<std::shared_ptr<detail::TaskState>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    live = live_;
  }
  for (const auto& s : live) Task(s).cancel();
  cv_.notify_all();
  // No job is queued or lane created once quit_ is set, so lanes_ holds still.
  for (auto& [name, lane] : lanes_)
    for (std::thread& t : lane.threads) t.join();
  for (auto& [name, lane] : lanes_)
    for (const auto& s : lane.queue) {  // never started
      {
        std::lock_guard<std::mutex> lock(s->mu);
        s->cancelled = true;
        s->finished = true;
      }
      s->cv.notify_all();
    }
}

Task TaskManager::enqueue(std::shared_ptr<detail::TaskState> s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (quit_) {  // shutting down: the job never runs
      s->cancel = true;
      s->cancelled = true;
      s->finished = true;
      return Task(s);
    }
    s->id = next_id_++;
    s->submitted = std::chrono::steady_clock::now();
    const std::string& name = s->options.lane;
    Lane& lane = lanes_[name];
    if (lane.threads.empty()) {
      const int n = name.empty() ? pool_threads_ : 1;
      for (int i = 0; i < n; ++i) lane.threads.emplace_back([this, name] { work(name); });
    }
    lane.queue.push_back(s);
    live_.push_back(s);
  }
  cv_.notify_all();
  return Task(s);
}

void TaskManager::work(const std::string& lane_name) {
  for (;;) {
    std::shared_ptr<detail::TaskState> s;
    {
      std::unique_lock<std::mutex> lock(mu_);
      Lane& lane = lanes_.at(lane_name);
      const bool pool = lane_name.empty();
      cv_.wait(lock, [&] { return quit_ || (!lane.queue.empty() && !(pool && held_)); });
      if (quit_) return;
      s = std::move(lane.queue.front());
      lane.queue.pop_front();
    }
    if (s->cancel) {
      s->cancelled = true;  // cancelled before it started: skipped
    } else {
      {
        std::lock_guard<std::mutex> lock(s->mu);
        s->running = true;
      }
      TaskContext ctx(*s);
      try {
        s->run(ctx);
        if (s->cancel) s->cancelled = true;
      } catch (const TaskCancelled&) {
        s->cancelled = true;
      } catch (const std::exception& e) {
        if (s->cancel) s->cancelled = true;
        else s->error = first_line(e.what());
      } catch (...) {
        s->error = "failed (an exception that is not a std::exception)";
      }
    }
    s->run = nullptr;  // what the job holds (a capture, a view) goes now, on this thread
    finish(s);
  }
}

void TaskManager::finish(const std::shared_ptr<detail::TaskState>& s) {
  // Finished and queued for poll() in one step: whoever sees the task finished finds its outcome
  // in the next poll(). (Marked first and queued after, a poll() between the two found nothing.)
  {
    std::lock_guard<std::mutex> lock(mu_);  // mu_ before a task's mu, as list() takes them
    {
      std::lock_guard<std::mutex> state(s->mu);
      s->running = false;
      s->finished = true;
    }
    if (s->deliver) finished_.push_back(s);
    else live_.erase(std::remove(live_.begin(), live_.end(), s), live_.end());
  }
  s->cv.notify_all();
}

std::size_t TaskManager::poll() {
  std::size_t n = 0;
  for (;;) {
    std::shared_ptr<detail::TaskState> s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_.empty()) return n;
      s = std::move(finished_.front());
      finished_.pop_front();
    }
    std::function<void()> deliver = std::move(s->deliver);
    s->deliver = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(std::remove(live_.begin(), live_.end(), s), live_.end());
    }
    ++n;
    deliver();  // may submit new tasks
  }
}

std::size_t TaskManager::unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

std::size_t TaskManager::unfinished(const std::string& lane) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<std::size_t>(std::count_if(live_.begin(), live_.end(), [&](const auto& s) { return s->options.lane == lane; }));
}

std::vector<TaskInfo> TaskManager::list() const {
  const auto now = std::chrono::steady_clock::now();
  std::vector<TaskInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : live_) {
    std::lock_guard<std::mutex> state(s->mu);
    if (s->finished) continue;
    TaskInfo t;
    t.id = s->id;
    t.name = s->name;
    t.lane = s->options.lane;
    t.text = s->text;
    t.fraction = s->fraction;
    t.running = s->running;
    t.listed = s->options.listed;
    t.cancellable = s->options.cancellable;
    t.cancelling = s->cancel.load();
    t.seconds = std::chrono::duration<double>(now - s->submitted).count();
    out.push_back(std::move(t));
  }
  return out;
}

bool TaskManager::cancel(std::uint64_t id) {
  std::shared_ptr<detail::TaskState> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& x : live_)
      if (x->id == id) s = x;
  }
  if (!s) return false;
  Task(s).cancel();
  return true;
}

void TaskManager::hold_pool(bool held) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = held;
  }
  cv_.notify_all();
}

bool TaskManager::pool_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

}  // namespace luka::studio
