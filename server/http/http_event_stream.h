// HttpEventStream: the events of one server-sent-events response
// (text/event-stream), handed from whichever thread makes them to the
// connection that writes them. Unbounded here: what bounds it is the
// StreamWindow of the request whose responses it carries, released as each
// event is written. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "common/mutex.h"

namespace manypy {

class HttpEventStream {
 public:
  struct Event {
    std::string data;               ///< the bytes of the event, "data: ...\n\n"
    std::function<void()> written;  ///< called once it was written or dropped; may be empty
  };

  /// Queues one event (any thread).
  void Push(Event event);
  /// No event follows the ones queued (any thread).
  void End();

  /// The writer's side: takes the next event into `*event` and returns true;
  /// else, if the stream has not ended, arranges for `wake` to be called
  /// (once, from the pushing thread) when there is more, and returns false
  /// with `*ended` false; at the end returns false with `*ended` true.
  bool Next(Event* event, bool* ended, std::function<void()> wake);
  /// The connection broke: drops what is queued (calling their `written`)
  /// and every later Push.
  void Abandon();

 private:
  Mutex mu_;
  std::deque<Event> events_ GUARDED_BY(mu_);
  std::function<void()> wake_ GUARDED_BY(mu_);
  bool ended_ GUARDED_BY(mu_) = false;
  bool abandoned_ GUARDED_BY(mu_) = false;
};

}  // namespace manypy
