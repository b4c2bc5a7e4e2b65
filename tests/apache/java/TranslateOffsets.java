import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * MM2's own answer to "where does this group resume on the target": RemoteClusterUtils.translateOffsets,
 * which reads the source alias's checkpoints topic on the target cluster.
 *
 * Usage: TranslateOffsets <target bootstrap servers> <source alias> <group>...
 * Prints one line per group partition: group, remote topic, partition, offset (tab-separated).
 */
public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        for (int i = 2; i < args.length; i++) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, args[1], args[i], Duration.ofSeconds(30));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                System.out.println(args[i] + "\t" + e.getKey().topic() + "\t" + e.getKey().partition() + "\t"
                    + e.getValue().offset());
            }
        }
    }
}
