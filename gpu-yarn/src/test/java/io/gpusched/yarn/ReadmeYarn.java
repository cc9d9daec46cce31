package io.gpusched.yarn;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** README.md's "### YARN NodeManager" section as written: its XML blocks and its {@code --add-opens} line. */
public final class ReadmeYarn {
    private ReadmeYarn() {
    }

    /** @return the section's text */
    public static String section() throws IOException {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !(Files.exists(dir.resolve("README.md"))
                && Files.readString(dir.resolve("README.md")).contains("### YARN NodeManager"))) {
            dir = dir.getParent();
        }
        if (dir == null) {
            throw new AssertionError("no README.md with a YARN section above " + Path.of("").toAbsolutePath());
        }
        String readme = Files.readString(dir.resolve("README.md"));
        int from = readme.indexOf("### YARN NodeManager");
        int to = readme.indexOf("\n### ", from + 1);
        return readme.substring(from, to < 0 ? readme.length() : to);
    }

    /** @return the ```xml blocks of the section */
    public static List<String> xmlBlocks() throws IOException {
        List<String> out = new ArrayList<>();
        Matcher m = Pattern.compile("```xml\n(.*?)```", Pattern.DOTALL).matcher(section());
        while (m.find()) {
            out.add(m.group(1));
        }
        return out;
    }

    /** @return the {@code --add-opens=...} options of the section's {@code HADOOP_OPTS} line */
    public static List<String> addOpens() throws IOException {
        Matcher line = Pattern.compile("export HADOOP_OPTS=\"\\$HADOOP_OPTS ([^\"]*)\"").matcher(section());
        if (!line.find()) {
            throw new AssertionError("README's YARN section has no export HADOOP_OPTS=\"$HADOOP_OPTS ...\" line");
        }
        List<String> out = List.of(line.group(1).trim().split("\\s+"));
        for (String o : out) {
            if (!o.matches("--add-opens=java\\.base/[a-z.]+=ALL-UNNAMED")) {
                throw new AssertionError("not an --add-opens option in README's HADOOP_OPTS: " + o);
            }
        }
        return out;
    }
}
