import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.util.HashSet;
import java.util.Set;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.apache.xbean.asm9.ClassReader;
import org.apache.xbean.asm9.ClassWriter;
import org.apache.xbean.asm9.commons.ClassRemapper;
import org.apache.xbean.asm9.commons.Remapper;

/**
 * Writes one jar holding the classes of the given Jackson jars moved from com.fasterxml.jackson
 * to org.apache.iceberg.shaded.com.fasterxml.jackson, the package iceberg-spark-runtime refers to.
 * Usage: java -cp xbean-asm9-shaded.jar:. RelocateJackson OUT.jar jackson-core.jar ...
 * Class references, string constants naming Jackson classes, class file paths (also under
 * META-INF/versions/N/) and META-INF/services files (name and lines) are renamed; Maven
 * metadata, module-info and the input manifests are dropped. Entry times are fixed, so the
 * output is the same for the same inputs.
 */
public class RelocateJackson {
  static final String FROM = "com/fasterxml/jackson/", TO = "org/apache/iceberg/shaded/" + FROM;

  static String move(String s, char sep) {
    String from = FROM.replace('/', sep);
    return s.startsWith(from) ? TO.replace('/', sep) + s.substring(from.length()) : s;
  }

  static String movePath(String path) { // a class under META-INF/versions/N/ keeps that prefix
    return path.replaceFirst("^(META-INF/versions/[0-9]+/)?" + FROM, "$1" + TO);
  }

  static JarEntry entry(String name) { // a fixed time, independent of the time zone
    JarEntry e = new JarEntry(name);
    e.setTimeLocal(LocalDateTime.of(1980, 2, 1, 0, 0));
    return e;
  }

  public static void main(String[] args) throws Exception {
    Remapper remapper = new Remapper() {
      @Override public String map(String internalName) { return move(internalName, '/'); }
      @Override public Object mapValue(Object value) {
        return value instanceof String ? move(move((String) value, '.'), '/') : super.mapValue(value);
      }
    };
    Manifest manifest = new Manifest();
    manifest.getMainAttributes().putValue("Manifest-Version", "1.0");
    manifest.getMainAttributes().putValue("Multi-Release", "true");
    Set<String> written = new HashSet<>();
    try (JarOutputStream out = new JarOutputStream(new FileOutputStream(args[0]))) {
      out.putNextEntry(entry(JarFile.MANIFEST_NAME));
      manifest.write(out);
      for (int i = 1; i < args.length; i++) {
        try (JarFile in = new JarFile(args[i])) {
          for (JarEntry e : java.util.Collections.list(in.entries())) {
            String name = e.getName(), base = name.substring(name.lastIndexOf('/') + 1);
            if (e.isDirectory() || name.equals(JarFile.MANIFEST_NAME) || name.startsWith("META-INF/maven/")
                || base.equals("module-info.class")) continue;
            byte[] data = in.getInputStream(e).readAllBytes();
            if (name.endsWith(".class")) {
              ClassWriter w = new ClassWriter(0);
              new ClassReader(data).accept(new ClassRemapper(w, remapper), 0);
              data = w.toByteArray();
              name = movePath(name);
            } else if (name.startsWith("META-INF/services/")) {
              name = "META-INF/services/" + move(base, '.');
              StringBuilder text = new StringBuilder();
              for (String line : new String(data, StandardCharsets.UTF_8).split("\n", -1))
                text.append(text.length() > 0 ? "\n" : "").append(move(line.trim(), '.'));
              data = text.toString().getBytes(StandardCharsets.UTF_8);
            } else if (name.startsWith("META-INF/")) { // LICENSE, NOTICE: one copy per input jar
              String jar = new java.io.File(args[i]).getName().replaceAll("\\.jar$", "");
              name = "META-INF/" + jar + "/" + name.substring("META-INF/".length());
            }
            if (!written.add(name)) continue;
            out.putNextEntry(entry(name));
            out.write(data);
          }
        }
      }
    }
  }
}
