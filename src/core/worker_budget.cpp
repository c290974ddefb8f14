#include "core/worker_budget.hpp"

#include <algorithm>

namespace outbox::budget {
namespace {

const Want* find(const std::vector<Want>& wants, std::uint32_t database) {
  for (const Want& w : wants) {
    if (w.database == database) return &w;
  }
  return nullptr;
}

void add_once(std::vector<std::uint32_t>& list, std::uint32_t database) {
  if (std::find(list.begin(), list.end(), database) == list.end()) list.push_back(database);
}

}  // namespace

Plan plan(const std::vector<Want>& wants, const std::vector<Slot>& slots) {
  Plan out;
  out.slots = slots;
  // has[i][k]: database wants[i] has a slot for its worker k.
  std::vector<std::vector<bool>> has(wants.size());
  for (std::size_t i = 0; i < wants.size(); ++i) {
    has[i].assign(static_cast<std::size_t>(std::max(wants[i].wanted, 0)), false);
  }
  for (Slot& slot : out.slots) {
    if (slot.database == 0) continue;
    const Want* want = find(wants, slot.database);
    if (want != nullptr && slot.worker >= 0 && slot.worker < want->wanted) {
      std::vector<bool>& mine = has[static_cast<std::size_t>(want - wants.data())];
      if (!mine[static_cast<std::size_t>(slot.worker)]) {
        mine[static_cast<std::size_t>(slot.worker)] = true;
        continue;
      }
    }
    if (slot.busy) {
      add_once(out.draining, slot.database);
      continue;
    }
    slot = Slot{};
  }
  int most = 0;
  for (const Want& w : wants) most = std::max(most, w.wanted);
  std::size_t next_free = 0;
  for (int worker = 0; worker < most; ++worker) {
    for (std::size_t i = 0; i < wants.size(); ++i) {
      if (worker >= wants[i].wanted || has[i][static_cast<std::size_t>(worker)]) continue;
      while (next_free < out.slots.size() && out.slots[next_free].database != 0) ++next_free;
      if (next_free == out.slots.size()) {
        add_once(out.starved, wants[i].database);
        continue;
      }
      out.slots[next_free] = Slot{wants[i].database, worker, false};
      has[i][static_cast<std::size_t>(worker)] = true;
    }
  }
  return out;
}

}  // namespace outbox::budget
