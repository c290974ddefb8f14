-- The consumer's inbox: inbox_receive() says whether a consumer has seen an event before,
-- and records it in the caller's transaction. Records are filed by the event's own time and
-- rotated with the events.
SET outbox.partition_interval = '1d';

-- An inbox never used has no partition, and rotation makes none.
SELECT count(*) AS inbox_rows FROM outbox.rotate() WHERE partition LIKE 'inbox%';
SELECT count(*) AS partitions FROM pg_inherits WHERE inhparent = 'outbox.inbox'::regclass;

-- Every bad input: its error, and nothing written.
SELECT regress.try($$SELECT outbox.inbox_receive(NULL, '01936f5e-7c00-7000-8000-000000000001')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('', '01936f5e-7c00-7000-8000-000000000001')$$);
SELECT regress.try($$SELECT outbox.inbox_receive(repeat('é', 256), '01936f5e-7c00-7000-8000-000000000001')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', NULL)$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '00000000-0000-0000-0000-000000000000', now())$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', 'infinity')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', '294276-12-31 23:59:59+00')$$);
SELECT regexp_replace(regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() + interval '30 days')$$),
                      '\(.*\)', '(...)') AS far_future;
SELECT count(*) AS written FROM outbox.inbox;

-- An event id from enqueue (a UUIDv7): new once per consumer.
SELECT outbox.enqueue('order', 'inbox', 'OrderCreated', '{}') AS id \gset
SELECT outbox.inbox_receive('billing', :'id') AS first,
       outbox.inbox_receive('billing', :'id') AS again,
       outbox.inbox_receive('shipping', :'id') AS other_consumer;
-- The first call that got this far made the partitions: one covering outbox.inbox_retention
-- back, today, and outbox.premake days ahead.
SELECT count(*) AS partitions,
       min(lower_bound) = outbox._bucket_start(now() - interval '7 days', 86400) AS from_retention,
       max(upper_bound) = outbox._bucket_start(now(), 86400) + interval '5 days' AS to_premake
  FROM outbox.inbox_partitions;

-- Its own time files it: a time passed along changes nothing.
SELECT outbox.inbox_receive('billing', :'id', now() - interval '3 days') AS with_a_time;
-- Any other id is filed by the time given, which must be the same for every copy.
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() - interval '3 days') AS v4_first,
       outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() - interval '3 days') AS v4_again;
-- Rolled back, the record is gone with the consumer's work: the event is new again.
BEGIN;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440001', now()) AS in_rolled_back;
ROLLBACK;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440001', now()) AS after_rollback;
SELECT consumer, event_id = :'id' AS from_enqueue,
       tableoid::regclass::text = 'outbox.' || (SELECT name FROM outbox.inbox_partitions
                                                  WHERE event_at >= lower_bound AND event_at < upper_bound) AS right_partition
  FROM outbox.inbox ORDER BY consumer, event_id;

-- Older than any partition (past outbox.inbox_retention): no record can tell a copy, so each
-- copy counts as new (at least once, never lost).
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440002', now() - interval '30 days') AS old,
       outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440002', now() - interval '30 days') AS old_again;

-- Rotation drops the partitions past outbox.inbox_retention, with their records.
SET outbox.inbox_retention = '1s';
SELECT action, detail FROM outbox.rotate() WHERE partition LIKE 'inbox%';
SELECT count(*) AS records_left FROM outbox.inbox;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() - interval '3 days') AS v4_after_its_partition_went;
RESET outbox.inbox_retention;
-- A partition dropped by hand leaves a hole: nothing recorded there, and rotation goes on.
SELECT name AS tomorrow FROM outbox.inbox_partitions
 WHERE lower_bound = outbox._bucket_start(now(), 86400) + interval '1 day' \gset
DROP TABLE outbox.:"tomorrow";
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440003', now() + interval '1 day') AS in_the_hole;
SELECT count(*) AS rotated FROM outbox.rotate_inbox();
SELECT count(*) AS listed_dropped FROM outbox.inbox_partitions WHERE name = :'tomorrow';
DELETE FROM outbox.inbox;
DELETE FROM outbox.events WHERE aggregateid = 'inbox';
RESET outbox.partition_interval;

-- Consumer names: no control character, no space at either end; case matters, as in a
-- quoted identifier ("billing" and "Billing" are two consumers).
SELECT regress.try($$SELECT outbox.inbox_receive(E'bill\ting', '550e8400-e29b-41d4-a716-446655440010', now())$$);
SELECT regress.try($$SELECT outbox.inbox_receive(E'billing\n', '550e8400-e29b-41d4-a716-446655440010', now())$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing ', '550e8400-e29b-41d4-a716-446655440010', now())$$);
SELECT regress.try($$SELECT outbox.inbox_receive(' billing', '550e8400-e29b-41d4-a716-446655440010', now())$$);
SELECT count(*) AS written FROM outbox.inbox;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440010', now()) AS lower,
       outbox.inbox_receive('Billing', '550e8400-e29b-41d4-a716-446655440010', now()) AS upper_is_another;

-- Consumer names bound to roles. Unbound, a name takes any role granted inbox_receive (as
-- in 0.6.0); bound, only the roles bound to it and those that have their privileges.
CREATE ROLE inbox_billing;
CREATE ROLE inbox_billing_app IN ROLE inbox_billing;
CREATE ROLE inbox_intruder;
GRANT USAGE ON SCHEMA outbox, regress TO inbox_billing, inbox_intruder;
GRANT EXECUTE ON FUNCTION outbox.inbox_receive(text, uuid, timestamptz) TO inbox_billing, inbox_intruder;
SET ROLE inbox_intruder;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440011', now()) AS unbound_takes_anyone;
-- Only the owner binds.
SELECT regress.try($$SELECT outbox.bind_inbox_consumer('billing', 'inbox_intruder')$$);
RESET ROLE;
SELECT outbox.bind_inbox_consumer('billing', 'inbox_billing') AS bound,
       outbox.bind_inbox_consumer('billing', 'inbox_billing') AS bound_again;
SELECT consumer, role FROM outbox.inbox_consumers ORDER BY consumer, role::text;
-- A bound role cannot be dropped, nor does DROP OWNED remove its bindings: unbind first.
-- pg_shdepend records it as a privilege on the column "role", which DROP ROLE names. The
-- dependencies follow the rows however they change (by hand too, as the owner).
SELECT regress.try($$DROP ROLE inbox_billing$$) AS drop_bound_role;
CREATE ROLE inbox_other;
INSERT INTO outbox.inbox_consumers (consumer, role) VALUES ('shipping', 'inbox_other');
DO $$
DECLARE
    d text;
BEGIN
    DROP ROLE inbox_other;
EXCEPTION WHEN dependent_objects_still_exist THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RAISE NOTICE 'detail: %', d;
END
$$;
SELECT regress.try($$DROP OWNED BY inbox_other$$) AS drop_owned,
       regress.try($$DROP ROLE inbox_other$$) AS drop_after_drop_owned;
-- Run by a role that is no superuser (a member of the bound role, as DROP OWNED asks), it is
-- refused as a REVOKE on a table it cannot see: unbind first (security.md).
CREATE ROLE inbox_admin;
GRANT inbox_other TO inbox_admin;
SET ROLE inbox_admin;
SELECT regress.try($$DROP OWNED BY inbox_other$$) AS drop_owned_by_member;
RESET ROLE;
DROP ROLE inbox_admin;
SELECT outbox.unbind_inbox_consumer('shipping', 'inbox_other') AS unbound;
DROP ROLE inbox_other;
-- pg_upgrade carries the rows, not their pg_shdepend entries: any statement on the table
-- (operations.md: DELETE ... WHERE false) records them again.
DELETE FROM pg_shdepend d
 WHERE d.classid = 'pg_class'::regclass AND d.objid = 'outbox.inbox_consumers'::regclass;
SELECT count(*) AS recorded_before FROM pg_shdepend d
 WHERE d.classid = 'pg_class'::regclass AND d.objid = 'outbox.inbox_consumers'::regclass;
DELETE FROM outbox.inbox_consumers WHERE false;
SELECT d.refobjid::regrole AS recorded_again FROM pg_shdepend d
 WHERE d.classid = 'pg_class'::regclass AND d.objid = 'outbox.inbox_consumers'::regclass;
SELECT regress.try($$DROP ROLE inbox_billing$$) AS drop_after_upgrade;
-- A role that does not exist (an oid) cannot be bound, even by hand.
SELECT regress.try($$INSERT INTO outbox.inbox_consumers (consumer, role) VALUES ('shipping', '4000000000')$$) AS dangling;
SELECT d.refobjid::regrole AS depended_on FROM pg_shdepend d
 WHERE d.classid = 'pg_class'::regclass AND d.objid = 'outbox.inbox_consumers'::regclass
 ORDER BY 1::text;
-- Another role can neither ask whether billing applied an event (the call would tell, even
-- rolled back) nor record one under billing's name: refused, nothing written.
SET ROLE inbox_intruder;
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440010', now())$$) AS probe;
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440012', now())$$) AS poison;
RESET ROLE;
SELECT event_id FROM outbox.inbox WHERE consumer = 'billing' ORDER BY event_id;
-- The bound role, a role that has its privileges, and a superuser may.
SET ROLE inbox_billing;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440012', now()) AS bound_role;
SET ROLE inbox_billing_app;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440012', now()) AS member_sees_copy;
RESET ROLE;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440013', now()) AS superuser;
-- The calling role is current_user: a SECURITY DEFINER function acts as its owner.
CREATE FUNCTION public.billing_receive(id uuid) RETURNS boolean LANGUAGE sql SECURITY DEFINER
    AS $$SELECT outbox.inbox_receive('billing', id, now())$$;
ALTER FUNCTION public.billing_receive(uuid) OWNER TO inbox_billing;
CREATE FUNCTION public.intruder_receive(id uuid) RETURNS boolean LANGUAGE sql SECURITY DEFINER
    AS $$SELECT outbox.inbox_receive('billing', id, now())$$;
ALTER FUNCTION public.intruder_receive(uuid) OWNER TO inbox_intruder;
SET ROLE inbox_intruder;
SELECT public.billing_receive('550e8400-e29b-41d4-a716-446655440014') AS through_billings_function;
RESET ROLE;
SET ROLE inbox_billing;
SELECT regress.try($$SELECT public.intruder_receive('550e8400-e29b-41d4-a716-446655440015')$$) AS through_intruders_function;
RESET ROLE;
DROP FUNCTION public.billing_receive(uuid), public.intruder_receive(uuid);
-- A binding made or removed in this session counts at once; one renamed role keeps its.
ALTER ROLE inbox_billing RENAME TO inbox_billing_renamed;
SELECT consumer, role FROM outbox.inbox_consumers ORDER BY consumer, role::text;
SET ROLE inbox_billing_renamed;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440016', now()) AS renamed_role;
RESET ROLE;
ALTER ROLE inbox_billing_renamed RENAME TO inbox_billing;
SELECT outbox.unbind_inbox_consumer('billing', 'inbox_billing') AS unbound,
       outbox.unbind_inbox_consumer('billing', 'inbox_billing') AS unbound_again;
SET ROLE inbox_intruder;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440017', now()) AS open_again;
RESET ROLE;
-- outbox.inbox_require_binding (superuser): a name bound to no role is refused, to anyone.
SELECT outbox.bind_inbox_consumer('billing', 'inbox_billing') AS bound;
SET outbox.inbox_require_binding = on;
SET ROLE inbox_intruder;
SELECT regress.try($$SELECT outbox.inbox_receive('shipping', '550e8400-e29b-41d4-a716-446655440018', now())$$) AS unbound;
SELECT regress.try($$SET outbox.inbox_require_binding = off$$) AS turn_off;
SET ROLE inbox_billing;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440018', now()) AS bound_name;
RESET ROLE;
SELECT regress.try($$SELECT outbox.inbox_receive('shipping', '550e8400-e29b-41d4-a716-446655440018', now())$$) AS superuser_unbound;
RESET outbox.inbox_require_binding;
-- Binding's own errors: nothing written.
SELECT regress.try($$SELECT outbox.bind_inbox_consumer(NULL, 'inbox_billing')$$);
SELECT regress.try($$SELECT outbox.bind_inbox_consumer('', 'inbox_billing')$$);
SELECT regress.try($$SELECT outbox.bind_inbox_consumer('billing ', 'inbox_billing')$$);
SELECT regress.try($$SELECT outbox.bind_inbox_consumer(E'bill\ning', 'inbox_billing')$$);
SELECT regress.try($$SELECT outbox.bind_inbox_consumer(repeat('b', 256), 'inbox_billing')$$);
SELECT regress.try($$SELECT outbox.bind_inbox_consumer('shipping', NULL)$$);
SELECT regress.try($$SELECT outbox.bind_inbox_consumer('shipping', 'no_such_role')$$);
SELECT regress.try($$SELECT outbox.unbind_inbox_consumer(NULL, 'inbox_billing')$$);
SELECT regress.try($$SELECT outbox.unbind_inbox_consumer('billing', NULL)$$);
SELECT consumer, role FROM outbox.inbox_consumers ORDER BY consumer, role::text;
SELECT consumer, event_id FROM outbox.inbox ORDER BY consumer, event_id;
SELECT outbox.unbind_inbox_consumer('billing', 'inbox_billing') AS unbound;
SELECT count(*) AS dependencies_left FROM pg_shdepend d
 WHERE d.classid = 'pg_class'::regclass AND d.objid = 'outbox.inbox_consumers'::regclass;
DELETE FROM outbox.inbox;
REVOKE ALL ON SCHEMA outbox, regress FROM inbox_billing, inbox_intruder;
REVOKE ALL ON FUNCTION outbox.inbox_receive(text, uuid, timestamptz) FROM inbox_billing, inbox_intruder;
DROP ROLE inbox_billing_app, inbox_billing, inbox_intruder;
