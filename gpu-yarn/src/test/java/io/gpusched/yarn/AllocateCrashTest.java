package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.testing.LedgerReader;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A NodeManager killed ({@code SIGKILL}) at random points of {@code allocateDevices}, between the placement decision
 * and the durable record included, five times over on one node ledger: the ledger file, walked record by record by
 * this test's own reader, never grants a GPU that a live record holds, every grant a process acknowledged (the call
 * returned, YARN would launch the container) is in the file with the GPUs acknowledged, and {@link LedgerReader}'s
 * view of what is live at the end holds no GPU twice.
 */
class AllocateCrashTest {

    @TempDir
    Path state;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aKillAnywhereNeverGrantsAGpuTwiceAndLosesNoAcknowledgedGrant() throws Exception {
        Map<String, Set<Integer>> acked = new HashMap<>();
        Random rnd = new Random(2311);
        for (int round = 0; round < 5; round++) {
            Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
                    System.getProperty("java.class.path"), AllocateCrashChild.class.getName(), state.toString(),
                    Long.toString(rnd.nextLong()))
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
            int target = 5 + rnd.nextInt(40);
            int seen = 0;
            try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(),
                    StandardCharsets.UTF_8))) {
                for (String line; seen < target && (line = out.readLine()) != null;) {
                    if (ack(line, acked)) {
                        seen++;
                    }
                }
                // somewhere in the next call: reading the ledger, deciding, writing or forcing
                LockSupport.parkNanos(rnd.nextInt(3_000_000));
                child.toHandle().destroyForcibly(); // SIGKILL, the streams stay open to read what is left
                assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
                // what the child printed before it died counts too: it was acknowledged
                for (String line; (line = out.readLine()) != null;) {
                    ack(line, acked);
                }
            }
            assertThat(seen).as("round %d: the child granted before it was killed", round).isEqualTo(target);
        }
        Map<String, Integer> indexOfUuid = new HashMap<>();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            for (GpuDevice d : inv.devices()) {
                indexOfUuid.put(d.uuid(), d.index());
            }
        }
        Map<String, Set<Integer>> granted = walk(state.resolve("ledger"), indexOfUuid);
        for (Map.Entry<String, Set<Integer>> e : acked.entrySet()) {
            assertThat(granted).as("acknowledged grant of %s in the ledger", e.getKey()).containsKey(e.getKey());
            assertThat(granted.get(e.getKey())).as("GPUs of %s", e.getKey()).isEqualTo(e.getValue());
        }
        LedgerReader end = LedgerReader.read(state);
        List<String> live = new ArrayList<>();
        end.live.values().forEach(l -> live.addAll(l.uuids()));
        assertThat(live).as("live at the end").doesNotHaveDuplicates();
    }

    /** @return whether {@code line} is the child's {@code ACK <container id> <minors>}, noted in {@code acked} */
    private static boolean ack(String line, Map<String, Set<Integer>> acked) {
        if (!line.startsWith("ACK ")) {
            return false;
        }
        String[] f = line.split(" ");
        Set<Integer> minors = new HashSet<>();
        for (String m : f[2].split(",")) {
            minors.add(Integer.parseInt(m));
        }
        acked.put(f[1], minors);
        return true;
    }

    /**
     * Walks the ledger file by its documented format ({@code <seq> <crc> <json>} lines after a header; a torn last
     * line is what a kill mid-write leaves): no allocation record takes a GPU a live record holds.
     *
     * @return GPU indices granted, by container id (the record's {@value YarnContainerGpus#LABEL} label)
     */
    private static Map<String, Set<Integer>> walk(Path ledger, Map<String, Integer> indexOfUuid) throws Exception {
        ObjectMapper json = new ObjectMapper();
        List<String> lines = Files.readAllLines(ledger, StandardCharsets.UTF_8);
        assertThat(lines.get(0)).startsWith("gpusched-ledger ");
        Map<String, String> holderOfUuid = new HashMap<>();
        Map<String, List<String>> uuidsOfId = new HashMap<>();
        Map<String, Set<Integer>> granted = new HashMap<>();
        for (int i = 1; i < lines.size(); i++) {
            String line = lines.get(i);
            int a = line.indexOf(' ');
            int b = line.indexOf(' ', a + 1);
            JsonNode n;
            try {
                n = json.readTree(line.substring(b + 1));
            } catch (Exception torn) {
                assertThat(i).as("only the last line may be torn: " + line).isEqualTo(lines.size() - 1);
                continue;
            }
            switch (n.path("op").asText()) {
                case "A" -> {
                    String id = n.get("id").asText();
                    List<String> uuids = new ArrayList<>();
                    Set<Integer> idx = new HashSet<>();
                    for (JsonNode u : n.get("devices")) {
                        String uuid = u.asText();
                        assertThat(holderOfUuid).as("seq %s: %s takes GPU %s", line.substring(0, a), id, uuid)
                                .doesNotContainKey(uuid);
                        holderOfUuid.put(uuid, id);
                        uuids.add(uuid);
                        idx.add(indexOfUuid.get(uuid));
                    }
                    uuidsOfId.put(id, uuids);
                    granted.put(n.path("request").path("labels").path(YarnContainerGpus.LABEL).asText(id), idx);
                }
                case "R" -> {
                    for (String uuid : uuidsOfId.getOrDefault(n.get("id").asText(), List.of())) {
                        holderOfUuid.remove(uuid);
                    }
                }
                case "S" -> throw new IllegalStateException("a compaction snapshot in a short test ledger: " + line);
                default -> {}
            }
        }
        return granted;
    }
}
