package io.gpusched.slurm;

import io.gpusched.core.internal.AsciiNumbers;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * One {@code Name=gpu} line of a {@code gres.conf}, as gpusched writes it or as {@link GresConfParser} read it.
 *
 * @param type          {@code Type=}, if given
 * @param files         {@code File=} expanded ({@code /dev/nvidia[0-1]} is two files), or the files of
 *                      {@code MultipleFiles=}
 * @param multipleFiles whether the files came from {@code MultipleFiles=} (one GRES made of several files: MIG)
 * @param cores         {@code Cores=} as a set of Slurm abstract core indices, if given
 * @param links         {@code Links=}, if given: -1 for the device itself, else the link count to each device in
 *                      file order
 * @param flags         {@code Flags=} values, lower case
 * @param count         {@code Count=}, if given
 * @param line          line number in the file it was read from (0 for a generated record)
 */
public record GresRecord(Optional<String> type, List<String> files, boolean multipleFiles,
        Optional<SortedSet<Integer>> cores, Optional<List<Integer>> links, List<String> flags,
        OptionalLong count, int line) {

    /** Copies the lists. */
    public GresRecord {
        files = List.copyOf(files);
        cores = cores.map(c -> Collections.unmodifiableSortedSet(new TreeSet<>(c)));
        links = links.map(List::copyOf);
        flags = List.copyOf(flags);
    }

    /** @return the line as gpusched writes it */
    public String toLine() {
        StringBuilder b = new StringBuilder("Name=gpu");
        type.ifPresent(t -> b.append(" Type=").append(t));
        b.append(multipleFiles ? " MultipleFiles=" : " File=").append(String.join(",", files));
        cores.ifPresent(c -> b.append(" Cores=").append(formatIntList(c)));
        links.ifPresent(l -> b.append(" Links=").append(String.join(",", l.stream().map(String::valueOf).toList())));
        if (!flags.isEmpty()) {
            b.append(" Flags=").append(String.join(",", flags));
        }
        count.ifPresent(c -> b.append(" Count=").append(c));
        return b.toString();
    }

    /**
     * Parses a list such as {@code 0-3,8,10-11}.
     *
     * @throws IllegalArgumentException naming the list and the expected form
     */
    public static List<Integer> parseIntList(String s) {
        List<Integer> out = new ArrayList<>();
        if (s.isEmpty()) {
            return out;
        }
        for (String part : s.split(",", -1)) {
            String[] r = part.split("-", -1);
            try {
                if (r.length == 1) {
                    out.add(number(r[0]));
                } else if (r.length == 2) {
                    int a = number(r[0]);
                    int z = number(r[1]);
                    if (a < 0 || z < a || z - a > 65536) {
                        throw new NumberFormatException();
                    }
                    for (int i = a; i <= z; i++) {
                        out.add(i);
                    }
                } else {
                    throw new NumberFormatException();
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("\"" + s + "\" is not a list of numbers and ranges;"
                        + " expected a form such as 0-3,8,10-11");
            }
        }
        return out;
    }

    /** A number as Slurm's strtol reads one: ASCII digits only (Integer.parseInt also takes other scripts' digits). */
    static int number(String s) {
        if (!AsciiNumbers.isDigits(s) || s.length() > 9) {
            throw new NumberFormatException(s);
        }
        return Integer.parseInt(s);
    }

    /** @return the set as ranges, e.g. {@code 0-3,8,10-11} */
    public static String formatIntList(SortedSet<Integer> set) {
        StringBuilder b = new StringBuilder();
        Integer start = null;
        Integer prev = null;
        for (int v : set) {
            if (prev != null && v == prev + 1) {
                prev = v;
                continue;
            }
            if (start != null) {
                append(b, start, prev);
            }
            start = v;
            prev = v;
        }
        if (start != null) {
            append(b, start, prev);
        }
        return b.toString();
    }

    private static void append(StringBuilder b, int a, int z) {
        if (b.length() > 0) {
            b.append(',');
        }
        b.append(a);
        if (z > a) {
            b.append('-').append(z);
        }
    }
}
