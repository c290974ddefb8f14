// A sink message with the three fields the templates read (topics, subjects, URLs), for the
// sinks' option tests.
#pragma once

#include <string_view>

#include "sinks/common/sink.hpp"

namespace outbox::sinks::test {

inline sinks::Message event_message(std::string_view aggregatetype, std::string_view aggregateid,
                                    std::string_view type) {
  sinks::Message m;
  m.aggregatetype = aggregatetype;
  m.aggregateid = aggregateid;
  m.type = type;
  return m;
}

}  // namespace outbox::sinks::test
