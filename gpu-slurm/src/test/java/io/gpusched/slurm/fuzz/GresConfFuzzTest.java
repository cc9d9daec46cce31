package io.gpusched.slurm.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpusched.slurm.GresConfException;
import io.gpusched.slurm.GresConfParser;
import io.gpusched.slurm.GresRecord;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;

/**
 * The gres.conf parser of {@code gpusched export slurm --check} under coverage-guided fuzzing: it returns records
 * or throws {@link GresConfException}, nothing else; a record gpusched writes back ({@link GresRecord#toLine()})
 * reads as the same record. Without {@code JAZZER_FUZZ} it runs over the committed inputs
 * ({@code src/test/resources/io/gpusched/slurm/fuzz/GresConfFuzzTestInputs/gresConf/}).
 */
class GresConfFuzzTest {

    @FuzzTest
    void gresConf(byte[] input) {
        String text = new String(input, StandardCharsets.UTF_8);
        List<GresRecord> records;
        try {
            records = GresConfParser.parse(text, Optional.of("node1"));
        } catch (GresConfException e) {
            if (e.getMessage() == null || !e.getMessage().startsWith("gres.conf line ")) {
                throw new AssertionError("message does not name the line: " + e.getMessage());
            }
            return;
        }
        for (GresRecord r : records) {
            if (r.files().isEmpty() || r.files().stream().anyMatch(f -> f.isEmpty() || f.contains(",")
                    || f.contains(" "))) {
                continue; // not a line gpusched would write: no round trip to check
            }
            List<GresRecord> back;
            try {
                back = GresConfParser.parse(r.toLine(), Optional.empty());
            } catch (GresConfException e) {
                continue; // e.g. a Type with '#' that became a comment
            }
            if (back.size() != 1 || !back.get(0).files().equals(r.files())
                    || !back.get(0).cores().equals(r.cores()) || !back.get(0).links().equals(r.links())) {
                throw new AssertionError("round trip changed " + r + " into " + back);
            }
        }
    }
}
