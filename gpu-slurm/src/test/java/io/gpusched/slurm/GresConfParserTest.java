package io.gpusched.slurm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.Test;

class GresConfParserTest {

    @Test
    void readsSlurmSyntax() {
        List<GresRecord> r = GresConfParser.parse("""
                # a comment
                AutoDetect=off
                NodeName=other Name=gpu Type=a100 File=/dev/nvidia9
                nodename=gs[1-3] name=GPU type=v100 file=/dev/nvidia[0-1] cores=0-3,8 \\
                   Flags=nvidia_gpu_env
                Name=gpu Type=v100 File=/dev/nvidia2 Links=-1,2,0 Count=1   # trailing
                Name=mps Count=100
                Name=gpu Type=a100_3g.20gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap[21-22]
                """, Optional.of("gs2"));
        assertThat(r).hasSize(3);
        assertThat(r.get(0).files()).containsExactly("/dev/nvidia0", "/dev/nvidia1");
        assertThat(r.get(0).cores().orElseThrow()).containsExactly(0, 1, 2, 3, 8);
        assertThat(r.get(0).flags()).containsExactly("nvidia_gpu_env");
        assertThat(r.get(0).line()).isEqualTo(4);
        assertThat(r.get(1).links().orElseThrow()).containsExactly(-1, 2, 0);
        assertThat(r.get(1).count()).hasValue(1);
        assertThat(r.get(2).multipleFiles()).isTrue();
        assertThat(r.get(2).files()).containsExactly("/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21",
                "/dev/nvidia-caps/nvidia-cap22");
    }

    @Test
    void badInputIsATypedErrorNamingTheLineAndWhatIsValid() {
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu\nName=gpu Fiel=/dev/nvidia0\n", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("line 2")
                .hasMessageContaining("unknown key \"Fiel\"").hasMessageContaining("valid keys are");
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia[3-1]", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("a-b with a <= b");
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia0 Links=-1,x", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("Links=-1,x");
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia0 Cores=a", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("0-3,8,10-11");
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia[0-3", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("unbalanced [");
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu Count=12Q File=/dev/x", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("K, M, G, T or P");
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia[0-5000]", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("1024");
    }

    static int lineOf(String text, String part) {
        List<String> l = text.lines().toList();
        for (int i = 0; i < l.size(); i++) {
            if (l.get(i).contains(part)) {
                return i + 1;
            }
        }
        throw new AssertionError(part + " not in\n" + text);
    }

    @Test
    void checkNamesEachDriftOnItsOwnLine() {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            SlurmGres g = SlurmGres.of(inv, new SlurmGres.Options(Path.of("/dev"), Path.of("/proc"),
                    CpuLayout.uniform(2, 20)));
            String text = g.gresConf()
                    .replace("File=/dev/nvidia3 Cores=0-19", "File=/dev/nvidia3 Cores=0-39")
                    .replace("Type=v100 File=/dev/nvidia6", "Type=a100 File=/dev/nvidia6")
                    .replace("Name=gpu Type=v100 File=/dev/nvidia7 Cores=20-39 Links=0,0,0,1,2,1,2,-1",
                            "Name=gpu Type=v100 File=/dev/nvidia7 Cores=20-39 Links=0,0,0,2,2,1,2,-1");
            assertThat(g.check(GresConfParser.parse(text, Optional.empty()))).containsExactlyInAnyOrder(
                    "wrong Cores for File=/dev/nvidia3 (line " + lineOf(text, "nvidia3") + "): 0-39 in gres.conf,"
                            + " 0-19 on the node",
                    "wrong Type for File=/dev/nvidia6 (line " + lineOf(text, "nvidia6") + "): a100 in gres.conf,"
                            + " v100 on the node",
                    "wrong Links for File=/dev/nvidia7 (line " + lineOf(text, "nvidia7") + "): to /dev/nvidia3 2 in"
                            + " gres.conf, 1 on the node");
            String moved = g.gresConf().replace("Name=gpu Type=v100 File=/dev/nvidia5 ", "# ")
                    + "Name=gpu Type=v100 File=/dev/nvidia9\n";
            assertThat(g.check(GresConfParser.parse(moved, Optional.empty()))).containsExactlyInAnyOrder(
                    "missing File=/dev/nvidia5: GPU 5 (" + inv.devices().get(5).uuid()
                            + ", Type=v100) is on the node but not in gres.conf",
                    "extra File=/dev/nvidia9 (line " + lineOf(moved, "nvidia9") + "): no GPU of this node has this"
                            + " device file",
                    "Links= not compared: gres.conf lists other devices than the node (see the missing/extra lines),"
                            + " and Links= count by position in the file");
        }
    }

    /** Random bytes and random mutations of a real file: a record or a GresConfException, nothing else. */
    @Test
    void fuzzStyleMutationsOnlyEverThrowTheTypedError() {
        String base = SlurmGoldenTest.render("dgx1-v100");
        Random r = new Random(26);
        String alphabet = "=,-[]#\\ \n/abcdefgNameFileLinksCores0123456789";
        int typed = 0;
        for (int i = 0; i < 20_000; i++) {
            StringBuilder b = new StringBuilder(base);
            for (int k = 1 + r.nextInt(6); k > 0; k--) {
                int at = r.nextInt(b.length() + 1);
                switch (r.nextInt(3)) {
                    case 0 -> b.insert(at, alphabet.charAt(r.nextInt(alphabet.length())));
                    case 1 -> { if (at < b.length()) { b.deleteCharAt(at); } }
                    default -> { if (at < b.length()) { b.setCharAt(at, (char) r.nextInt(128)); } }
                }
            }
            try {
                for (GresRecord x : GresConfParser.parse(b.toString(), Optional.empty())) {
                    assertThat(x.files().size()).isLessThanOrEqualTo(1024 * 8);
                }
            } catch (GresConfException e) {
                typed++;
                assertThat(e.getMessage()).startsWith("gres.conf line ");
            }
        }
        assertThat(typed).as("mutations that were refused").isPositive();
    }
}
