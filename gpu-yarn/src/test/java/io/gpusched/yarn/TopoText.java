package io.gpusched.yarn;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;

/**
 * An independent reading of {@code nvidia-smi topo -m} text: NVLink counts per GPU pair, and the best NVLink sum a
 * set of {@code k} GPUs drawn from an offer can have (brute force). Shares no code with gpusched or Hadoop.
 */
final class TopoText {
    final int n;
    final int[][] links;
    final String text;

    private TopoText(String text) {
        this.text = text;
        List<String> rows = text.lines().map(String::trim).takeWhile(l -> !l.startsWith("Legend"))
                .filter(l -> l.startsWith("GPU")).filter(l -> !l.contains("Affinity")).toList();
        n = rows.size();
        links = new int[n][n];
        for (String r : rows) {
            String[] t = r.split("\\s+");
            int row = Integer.parseInt(t[0].substring(3));
            for (int c = 0; c < n; c++) {
                String cell = t[c + 1];
                links[row][c] = cell.matches("NV[0-9]+") ? Integer.parseInt(cell.substring(2)) : 0;
            }
        }
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                if (links[a][b] != links[b][a]) {
                    throw new IllegalStateException("asymmetric topo text at " + a + "," + b);
                }
            }
        }
    }

    static TopoText dgx1() {
        try (InputStream in = TopoText.class.getResourceAsStream("dgx1-v100-topo.txt")) {
            return new TopoText(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** @return NVLinks summed over the pairs of a set of GPU indices */
    int linksOf(Collection<Integer> set) {
        Integer[] a = set.toArray(new Integer[0]);
        int s = 0;
        for (int i = 0; i < a.length; i++) {
            for (int j = i + 1; j < a.length; j++) {
                s += links[a[i]][a[j]];
            }
        }
        return s;
    }

    /** @return the largest {@link #linksOf} of any k-subset of the offer (a bit mask over GPU indices) */
    int bestLinks(int offerMask, int k) {
        int best = -1;
        for (int m = 0; m < (1 << n); m++) {
            if ((m & offerMask) != m || Integer.bitCount(m) != k) {
                continue;
            }
            int s = 0;
            for (int a = 0; a < n; a++) {
                for (int b = a + 1; b < n; b++) {
                    if ((m >> a & 1) == 1 && (m >> b & 1) == 1) {
                        s += links[a][b];
                    }
                }
            }
            best = Math.max(best, s);
        }
        return best;
    }
}
