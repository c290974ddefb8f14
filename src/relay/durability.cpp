#include "relay/durability.hpp"

extern "C" {
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "replication/syncrep.h"
#include "replication/walsender_private.h"
#include "storage/lwlock.h"
}

namespace outbox::pg::relay {

XLogRecPtr flush_visible_commits() {
  XLogRecPtr lsn = GetXLogInsertRecPtr();
  // At a page boundary the insert position points past the page header, which is written
  // only with the next record: XLogFlush() would fail ("xlog flush request ... is not
  // satisfied"). The boundary itself is past every record inserted.
  if (XLogSegmentOffset(lsn, wal_segment_size) == SizeOfXLogLongPHD) {
    lsn -= SizeOfXLogLongPHD;
  } else if (lsn % XLOG_BLCKSZ == SizeOfXLogShortPHD) {
    lsn -= SizeOfXLogShortPHD;
  }
  // Defined only by bench/relay/durability.sh, for its comparison build without the flush.
#ifndef OUTBOX_BENCH_NO_DURABILITY_WAIT
  XLogFlush(lsn);
#endif
  return lsn;
}

void flush_commits(XLogRecPtr upto) {
#ifdef OUTBOX_BENCH_NO_DURABILITY_WAIT  // bench/relay/durability.sh's comparison build
  upto = InvalidXLogRecPtr;
#endif
  if (!XLogRecPtrIsInvalid(upto) && XLogNeedsFlush(upto)) XLogFlush(upto);
}

bool sync_standbys_behind(XLogRecPtr lsn) {
  // The walsenders of synchronous standbys keep lsn[] up to date as the standbys report,
  // whether or not a backend waits (SyncRepReleaseWaiters).
  // As SyncRepWaitForLSN decides: from the checkpointer's reading of synchronous_standby_names
  // once it has made one, from the setting itself before.
  LWLockAcquire(SyncRepLock, LW_SHARED);
  const bits8 status = WalSndCtl->sync_standbys_status;
  const XLogRecPtr flushed = WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH];
  LWLockRelease(SyncRepLock);
  const bool defined = (status & SYNC_STANDBY_INIT) != 0
                           ? (status & SYNC_STANDBY_DEFINED) != 0
                           : SyncRepStandbyNames != nullptr && SyncRepStandbyNames[0] != '\0';
  return defined && flushed < lsn;
}

}  // namespace outbox::pg::relay
