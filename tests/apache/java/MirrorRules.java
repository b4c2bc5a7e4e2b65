/*
 * MM2's own rules driven from a script on stdin, for tests/apache/test_mm2_rules.py: the same
 * operations go to mirrorlag's Python replicas, and the two answers must be equal line for line.
 *
 *   java org.apache.kafka.connect.mirror.MirrorRules writer|store|checkpoint|records < script
 *
 * In MM2's package so that its package-private classes and test hooks are reachable:
 * OffsetSyncWriter's test constructor, OffsetSyncStore's test constructor with backingStoreStart()
 * overridden (no Kafka), MirrorCheckpointTask's and CheckpointStore's test constructors. One
 * reflective write: MirrorCheckpointTask.topicFilter (private; the test constructor accepts every
 * topic), set to a DefaultTopicFilter configured as the case says.
 *
 * One answer line per operation (see each mode), "case ..." lines start a new case and answer
 * "case". Strings (topics, groups) never contain spaces.
 */
package org.apache.kafka.connect.mirror;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;

public class MirrorRules {

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        System.setOut(System.err);  // the answers alone on stdout: log4j2's default console is System.out
        switch (args[0]) {
            case "writer": writer(in, out); break;
            case "store": store(in, out); break;
            case "checkpoint": checkpoint(in, out); break;
            case "records": records(in, out); break;
            default: throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        out.flush();
        System.exit(0);  // the fake producer's network thread must not keep the JVM alive
    }

    // ---- OffsetSyncWriter -------------------------------------------------------------------

    /** A KafkaProducer that sends nothing: it keeps each record and its callback until the
     * script acknowledges it. The real constructor runs (nothing listens on its bootstrap). */
    static final class HeldProducer extends KafkaProducer<byte[], byte[]> {
        final ArrayDeque<Callback> inFlight = new ArrayDeque<>();
        final List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();

        HeldProducer() {
            super(props(), new ByteArraySerializer(), new ByteArraySerializer());
        }

        static Properties props() {
            Properties p = new Properties();
            p.put("bootstrap.servers", "127.0.0.1:9");
            p.put("client.id", "mirror-rules");
            return p;
        }

        @Override
        public Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, Callback callback) {
            sent.add(record);
            inFlight.add(callback);
            return CompletableFuture.completedFuture(null);
        }
    }

    static String sync(OffsetSync s) {
        return s.topicPartition().topic() + ":" + s.topicPartition().partition() + ":" + s.upstreamOffset() + ":"
            + s.downstreamOffset();
    }

    static String syncs(Map<TopicPartition, OffsetSync> m) {
        List<String> parts = new ArrayList<>();
        for (OffsetSync s : m.values()) parts.add(sync(s));
        return "[" + String.join(",", parts) + "]";
    }

    /**
     * case MAX_OFFSET_LAG        a new OffsetSyncWriter (test constructor, Semaphore(10))
     * q TOPIC PARTITION UP DOWN  maybeQueueOffsetSyncs
     * f                          firePendingOffsetSyncs
     * p                          promoteDelayedOffsetSyncs
     * a | x                      the oldest send in flight, if any, completes (x: with an error)
     * Answer: sent=[t:p:u:d,...] pending=[...] delayed=[...] out=N st=PU,PD,LAST,SHOULD (st=- but for q)
     */
    static void writer(BufferedReader in, PrintStream out) throws Exception {
        HeldProducer producer = new HeldProducer();
        OffsetSyncWriter w = null;
        Semaphore permits = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split(" ");
            if (a[0].isEmpty()) continue;
            if (a[0].equals("case")) {
                permits = new Semaphore(10);
                w = new OffsetSyncWriter(producer, "mm2-offset-syncs.t.internal", permits, Long.parseLong(a[1]));
                producer.inFlight.clear();
                producer.sent.clear();
                out.println("case");
                continue;
            }
            String state = "-";
            switch (a[0]) {
                case "q": {
                    TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                    w.maybeQueueOffsetSyncs(tp, Long.parseLong(a[3]), Long.parseLong(a[4]));
                    OffsetSyncWriter.PartitionState s = w.partitionStates().get(tp);
                    state = s.previousUpstreamOffset + "," + s.previousDownstreamOffset + ","
                        + s.lastSyncDownstreamOffset + "," + (s.shouldSyncOffsets ? 1 : 0);
                    break;
                }
                case "f": w.firePendingOffsetSyncs(); break;
                case "p": w.promoteDelayedOffsetSyncs(); break;
                case "a":
                case "x":
                    if (!producer.inFlight.isEmpty())
                        producer.inFlight.remove().onCompletion(null, a[0].equals("x") ? new RuntimeException("test failure") : null);
                    break;
                default: throw new IllegalArgumentException(line);
            }
            List<String> sent = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : producer.sent) {
                if (r.partition() != 0) throw new IllegalStateException("sync sent to partition " + r.partition());
                sent.add(sync(OffsetSync.deserializeRecord(
                    new ConsumerRecord<>(r.topic(), 0, 0L, r.key(), r.value()))));
            }
            producer.sent.clear();
            out.println("sent=[" + String.join(",", sent) + "] pending=" + syncs(w.getPendingOffsetSyncs())
                + " delayed=" + syncs(w.getDelayedOffsetSyncs()) + " out=" + (10 - permits.availablePermits())
                + " st=" + state);
        }
    }

    // ---- OffsetSyncStore --------------------------------------------------------------------

    /** The store without its KafkaBasedLog: the script feeds the records. */
    static final class ScriptedStore extends OffsetSyncStore {
        ScriptedStore(boolean mustReadToEnd) {
            super();
            this.initializationMustReadToEnd = mustReadToEnd;
        }

        @Override
        void backingStoreStart() {
        }

        void sync(String topic, int partition, long upstream, long downstream) {
            OffsetSync s = new OffsetSync(new TopicPartition(topic, partition), upstream, downstream);
            handleRecord(new ConsumerRecord<>("mm2-offset-syncs.t.internal", 0, 0L, s.recordKey(), s.recordValue()));
        }

        /** Runs of the same sync object in the 64 slots, newest first: u:d*count,... */
        String slots(TopicPartition tp) {
            StringBuilder b = new StringBuilder();
            OffsetSync previous = null;
            int run = 0;
            for (int i = 0; i < SYNCS_PER_PARTITION; i++) {
                OffsetSync s = syncFor(tp, i);
                if (s != previous && previous != null) {
                    b.append(previous.upstreamOffset()).append(':').append(previous.downstreamOffset())
                        .append('*').append(run).append(',');
                    run = 0;
                }
                previous = s;
                run++;
            }
            b.append(previous.upstreamOffset()).append(':').append(previous.downstreamOffset()).append('*').append(run);
            return b.toString();
        }
    }

    static String translation(OptionalLong o) {
        return o.isPresent() ? Long.toString(o.getAsLong()) : "empty";
    }

    /**
     * case MUST_READ_TO_END(0|1)  a new store, as MirrorCheckpointTask starts it (start(flag))
     * s TOPIC PARTITION UP DOWN   a sync read from the topic; answers the partition's slots
     * end                         the initial read reached the end (start() returns)
     * t TOPIC PARTITION OFFSET    translateDownstream: the offset, -1 or "empty"
     */
    static void store(BufferedReader in, PrintStream out) throws Exception {
        ScriptedStore st = null;
        boolean mustReadToEnd = true;
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split(" ");
            if (a[0].isEmpty()) continue;
            switch (a[0]) {
                case "case":
                    mustReadToEnd = a[1].equals("1");
                    st = new ScriptedStore(mustReadToEnd);
                    out.println("case");
                    break;
                case "s": {
                    st.sync(a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]), Long.parseLong(a[4]));
                    out.println(st.slots(new TopicPartition(a[1], Integer.parseInt(a[2]))));
                    break;
                }
                case "end":
                    st.start(mustReadToEnd);
                    out.println("end");
                    break;
                case "t":
                    out.println(translation(st.translateDownstream("g", new TopicPartition(a[1], Integer.parseInt(a[2])),
                        Long.parseLong(a[3]))));
                    break;
                default: throw new IllegalArgumentException(line);
            }
        }
    }

    // ---- MirrorCheckpointTask ---------------------------------------------------------------

    static String checkpoint(Checkpoint c) {
        return c.topicPartition().topic() + ":" + c.topicPartition().partition() + ":" + c.upstreamOffset() + ":"
            + c.downstreamOffset() + ":" + hex(c.recordKey()) + ":" + hex(c.recordValue());
    }

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) b.append(String.format("%02x", x));
        return b.toString();
    }

    static Map<TopicPartition, OffsetAndMetadata> offsets(String[] a, int from) {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        for (int i = from; i + 2 < a.length; i += 3)
            m.put(new TopicPartition(a[i], Integer.parseInt(a[i + 1])), new OffsetAndMetadata(Long.parseLong(a[i + 2])));
        return m;
    }

    /**
     * case SOURCE TARGET default|identity SEPARATOR MUST_READ_TO_END(0|1)
     * include REGEXES / exclude REGEXES   the topic filter's `topics` / `topics.exclude` (comma lists)
     * prior GROUP REMOTE_TOPIC PARTITION UP DOWN   a checkpoint CheckpointStore read at start
     * s TOPIC PARTITION UP DOWN / end     as in store mode (answer "-")
     * g GROUP [TOPIC PARTITION OFFSET]... the group's committed offsets: checkpointsForGroup, then
     *                                      CheckpointStore.update, as sourceRecordsForGroup does;
     *                                      answers the new checkpoints, sorted
     * idle GROUP [REMOTE_TOPIC PARTITION OFFSET]...  the group's offsets on the target, an idle group
     * sync                                 syncGroupOffset(): what it would write, per group, sorted
     */
    static void checkpoint(BufferedReader in, PrintStream out) throws Exception {
        ScriptedStore st = null;
        MirrorCheckpointTask task = null;
        Map<String, Map<TopicPartition, Checkpoint>> prior = null;
        Map<String, Map<TopicPartition, OffsetAndMetadata>> idle = null;
        CheckpointStore checkpoints = null;
        Map<String, String> filterConfig = new HashMap<>();
        boolean mustReadToEnd = true;
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split(" ");
            if (a[0].isEmpty()) continue;
            switch (a[0]) {
                case "case": {
                    mustReadToEnd = a[5].equals("1");
                    st = new ScriptedStore(mustReadToEnd);
                    ReplicationPolicy policy = a[3].equals("identity") ? new IdentityReplicationPolicy()
                        : new DefaultReplicationPolicy();
                    Map<String, String> policyConfig = new HashMap<>();
                    policyConfig.put("replication.policy.separator", a[4]);
                    policyConfig.put("source.cluster.alias", a[1]);  // MirrorMakerConfig sets it in every connector's config
                    ((DefaultReplicationPolicy) policy).configure(policyConfig);
                    prior = new HashMap<>();
                    idle = new HashMap<>();
                    checkpoints = new CheckpointStore(prior);
                    task = new MirrorCheckpointTask(a[1], a[2], policy, st, new HashSet<>(), idle, checkpoints);
                    filterConfig.clear();
                    out.println("case");
                    break;
                }
                case "include":
                case "exclude": {
                    String value = line.trim().substring(a[0].length()).trim();
                    filterConfig.put(a[0].equals("include") ? "topics" : "topics.exclude", value);
                    DefaultTopicFilter filter = new DefaultTopicFilter();
                    filter.configure(filterConfig);
                    Field f = MirrorCheckpointTask.class.getDeclaredField("topicFilter");
                    f.setAccessible(true);
                    f.set(task, filter);
                    out.println("-");
                    break;
                }
                case "prior": {
                    Checkpoint c = new Checkpoint(a[1], new TopicPartition(a[2], Integer.parseInt(a[3])),
                        Long.parseLong(a[4]), Long.parseLong(a[5]), "");
                    prior.computeIfAbsent(a[1], ignored -> new HashMap<>()).put(c.topicPartition(), c);
                    out.println("-");
                    break;
                }
                case "s":
                    st.sync(a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]), Long.parseLong(a[4]));
                    out.println("-");
                    break;
                case "end":
                    st.start(mustReadToEnd);
                    out.println("-");
                    break;
                case "g": {
                    Map<TopicPartition, Checkpoint> made = task.checkpointsForGroup(offsets(a, 2), a[1]);
                    checkpoints.update(a[1], made);
                    List<String> parts = new ArrayList<>();
                    for (Checkpoint c : made.values()) parts.add(checkpoint(c));
                    Collections.sort(parts);
                    out.println("[" + String.join(",", parts) + "]");
                    break;
                }
                case "idle":
                    idle.put(a[1], offsets(a, 2));
                    out.println("-");
                    break;
                case "sync": {
                    Map<String, Map<TopicPartition, OffsetAndMetadata>> written = task.syncGroupOffset();
                    List<String> groups = new ArrayList<>();
                    for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> e : new TreeMap<>(written).entrySet()) {
                        List<String> parts = new ArrayList<>();
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> o : e.getValue().entrySet())
                            parts.add(o.getKey().topic() + ":" + o.getKey().partition() + ":" + o.getValue().offset());
                        Collections.sort(parts);
                        groups.add(e.getKey() + "{" + String.join(",", parts) + "}");
                    }
                    out.println("[" + String.join(",", groups) + "]");
                    break;
                }
                default: throw new IllegalArgumentException(line);
            }
        }
    }

    // ---- record formats ---------------------------------------------------------------------

    /**
     * sync TOPIC PARTITION UP DOWN                     OffsetSync.recordKey()/recordValue() in hex
     * checkpoint GROUP TOPIC PARTITION UP DOWN [META]   Checkpoint.recordKey()/recordValue() in hex
     * Strings arrive hex-encoded (UTF-8), so any string can be tested.
     */
    static void records(BufferedReader in, PrintStream out) throws Exception {
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split(" ");
            if (a[0].isEmpty()) continue;
            switch (a[0]) {
                case "sync": {
                    OffsetSync s = new OffsetSync(new TopicPartition(unhex(a[1]), Integer.parseInt(a[2])),
                        Long.parseLong(a[3]), Long.parseLong(a[4]));
                    out.println(hex(s.recordKey()) + " " + hex(s.recordValue()));
                    break;
                }
                case "checkpoint": {
                    Checkpoint c = new Checkpoint(unhex(a[1]), new TopicPartition(unhex(a[2]), Integer.parseInt(a[3])),
                        Long.parseLong(a[4]), Long.parseLong(a[5]), a.length > 6 ? unhex(a[6]) : "");
                    out.println(hex(c.recordKey()) + " " + hex(c.recordValue()));
                    break;
                }
                default: throw new IllegalArgumentException(line);
            }
        }
    }

    static String unhex(String s) {
        if (s.equals("-")) return "";
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }
}
