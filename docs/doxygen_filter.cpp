// Doxygen's input filter for xgrad's headers (docs/Doxyfile.in): the headers
// document their API with plain // comments, as the rest of the code does;
// this program prints a header with those comments turned into Doxygen's,
// line for line, so that the source stays as it is.
//
//   doxygen_filter nn/module.h     (Doxygen runs it on every input file)
//
// At namespace and class scope (never inside a function body):
//   - the comment before `#pragma once` documents the file (\file);
//   - a comment block right above code documents that code: `///`; when the
//     code below it is several declarations (up to a blank line, the next
//     comment block or the end of the scope), or one declaration of several
//     names ("int a, b;"), the block documents each of them (a member group:
//     `///@{` ... `///@}`, DISTRIBUTE_GROUP_DOC);
//   - a comment after a declaration on its line documents it: `///<`, and
//     the comment lines aligned under it continue it (after a closing brace
//     or a preprocessor line, a comment stays a comment).
// A comment block followed by a blank line is a heading and stays a comment.
// So in a public header, a comment documents what follows it up to the next
// blank line or comment: separate declarations that need their own words.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

size_t indent(const std::string& s) {
  const size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? s.size() : i;
}
bool blank(const std::string& s) { return indent(s) == s.size(); }
bool comment_only(const std::string& s) { return s.compare(indent(s), 2, "//") == 0; }

// A ' between two letters or digits separates digits (1'000'000), it opens no literal.
bool digit_separator(const std::string& s, size_t i) {
  return s[i] == '\'' && i > 0 && i + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[i - 1])) &&
         std::isalnum(static_cast<unsigned char>(s[i + 1]));
}

// Column of a trailing // comment outside string and character literals, or npos.
size_t trailing_comment(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if ((c == '"' || c == '\'') && !digit_separator(s, i)) {
      quote = c;
    } else if (c == '/' && s[i + 1] == '/') {
      return i;
    }
  }
  return std::string::npos;
}

bool opens_scope(const std::string& code) {
  for (const char* k : {"namespace", "class", "struct", "enum", "union", "extern \"C\""}) {
    const size_t at = code.find(k);
    if (at != std::string::npos && (at == 0 || code[at - 1] == ' ') && code.find('(') == std::string::npos) return true;
  }
  return false;
}

// Whether the declaration starting at lines[k] declares several names
// ("int64_t a = 1, b = 2;"): a comma outside (), [], {} and <> before its ';'.
bool several_declarators(const std::vector<std::string>& lines, size_t k, size_t ind) {
  std::string text;
  for (size_t j = k; j < lines.size() && !blank(lines[j]) && (j == k || indent(lines[j]) > ind); ++j) {
    const size_t c = trailing_comment(lines[j]);
    text += (c == std::string::npos ? lines[j] : lines[j].substr(0, c)) + " ";
    if (text.find_first_of(";{") != std::string::npos) break;
  }
  for (size_t at; (at = text.find("<<")) != std::string::npos || (at = text.find(">>")) != std::string::npos;)
    text.replace(at, 2, "  ");  // shifts, not brackets
  if (text.substr(0, text.find('=')).find('(') != std::string::npos || opens_scope(text)) return false;  // a function
  int depth = 0;
  for (char ch : text) {
    if (ch == ';') break;
    if (std::string("([{<").find(ch) != std::string::npos) ++depth;
    else if (std::string(")]}>").find(ch) != std::string::npos) --depth;
    else if (ch == ',' && depth == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: doxygen_filter HEADER\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "doxygen_filter: cannot read %s\n", argv[1]);
    return 1;
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);

  std::vector<bool> scopes;  // open braces: true for a namespace, class, struct or enum; false for a body
  auto in_body = [&] {
    for (bool s : scopes)
      if (!s) return true;
    return false;
  };
  auto track_braces = [&](const std::string& code) {
    const bool scope = opens_scope(code);
    char quote = 0;
    for (size_t i = 0; i < code.size(); ++i) {
      const char c = code[i];
      if (quote) {
        if (c == '\\') ++i;
        else if (c == quote) quote = 0;
      } else if ((c == '"' || c == '\'') && !digit_separator(code, i)) {
        quote = c;
      } else if (c == '{') {
        scopes.push_back(scope);
      } else if (c == '}' && !scopes.empty()) {
        scopes.pop_back();
      }
    }
  };
  auto code_of = [](const std::string& l) {
    const size_t c = trailing_comment(l);
    return c == std::string::npos ? l : l.substr(0, c);
  };
  // The comment's text is prose, not Doxygen markup: its backslashes
  // ("'\r'"), at signs, angle brackets ("(B, <L>)") and hashes are escaped.
  auto as_doc = [](const std::string& l, const char* mark) {
    const size_t at = trailing_comment(l);
    std::string out = l.substr(0, at) + mark;
    for (size_t i = at + 2; i < l.size(); ++i) {
      if (std::string("\\@<>#").find(l[i]) != std::string::npos) out += '\\';
      out += l[i];
    }
    return out;
  };

  bool file_doc = true;  // before #pragma once
  size_t trailing_col = std::string::npos;  // column of the last declaration's trailing comment
  size_t group_indent = std::string::npos;  // open member group: the indentation of its declarations
  auto close_group = [&] {
    if (group_indent == std::string::npos) return;
    std::cout << std::string(group_indent, ' ') << "///@}\n";
    group_indent = std::string::npos;
  };

  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (file_doc) {
      if (l.rfind("#pragma once", 0) == 0) {
        file_doc = false;
        std::cout << l << "\n";
      } else if (comment_only(l)) {
        std::cout << (i == 0 ? "/// \\file\n" : "") << as_doc(l, "///") << "\n";
      } else {
        std::cout << l << "\n";
      }
      continue;
    }
    if (in_body()) {  // function bodies pass unchanged
      track_braces(code_of(l));
      std::cout << l << "\n";
      continue;
    }
    if (group_indent != std::string::npos && !blank(l) && indent(l) < group_indent) close_group();
    if (blank(l)) {
      close_group();
      trailing_col = std::string::npos;
      std::cout << l << "\n";
      continue;
    }
    if (comment_only(l)) {
      if (trailing_col != std::string::npos && indent(l) == trailing_col) {  // continues the comment above
        std::cout << as_doc(l, "///<") << "\n";
        continue;
      }
      close_group();
      size_t end = i;
      while (end < lines.size() && comment_only(lines[end]) && indent(lines[end]) == indent(l)) ++end;
      const bool heading = end == lines.size() || blank(lines[end]) || comment_only(lines[end]);
      for (size_t k = i; k < end; ++k) std::cout << (heading ? lines[k] : as_doc(lines[k], "///")) << "\n";
      if (!heading) {
        // Several declarations below at this indentation, before a blank
        // line, a comment or a closing scope: a member group.
        int starts = 0;
        for (size_t k = end; k < lines.size() && !blank(lines[k]) && indent(lines[k]) >= indent(l); ++k) {
          if (comment_only(lines[k]) && indent(lines[k]) == indent(l)) break;
          if (indent(lines[k]) == indent(l) && lines[k][indent(l)] != '}') ++starts;
        }
        if (starts > 1 || (starts == 1 && several_declarators(lines, end, indent(l)))) {
          std::cout << std::string(indent(l), ' ') << "///@{\n";
          group_indent = indent(l);
        }
      }
      i = end - 1;
      trailing_col = std::string::npos;
      continue;
    }
    const size_t c = trailing_comment(l);
    track_braces(code_of(l));
    std::string code = l.substr(0, c == std::string::npos ? l.size() : c);
    code.erase(0, indent(code));
    while (!code.empty() && code.back() == ' ') code.pop_back();
    const bool closes_or_directive = !code.empty() && (code[0] == '#' || code == "}" || code == "};");
    if (c != std::string::npos && !in_body() && !closes_or_directive) {
      std::cout << as_doc(l, "///<") << "\n";
      trailing_col = c;
    } else {
      std::cout << l << "\n";
      trailing_col = std::string::npos;
    }
  }
  close_group();
  return 0;
}
