#include "interpreters/elf_object.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace manypy {
namespace {

// A file mapped into memory; every access is bounds-checked so a truncated or
// hostile file produces an error, never a crash.
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  Status Open(const std::string& path, bool writable) {
    path_ = path;
    int fd = open(path.c_str(), writable ? O_RDWR : O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFound("cannot open ELF file " + path + ": " + strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      close(fd);
      return InvalidArgument(path + " is not an ELF shared object (too small)");
    }
    size_ = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, size_, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return Internal("cannot map " + path + ": " + strerror(errno));
    data_ = static_cast<unsigned char*>(p);
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB) {
      return InvalidArgument(path + " is not a little-endian ELF64 file");
    }
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || !InBounds(eh->e_shoff, eh->e_shnum * sizeof(Elf64_Shdr))) {
      return InvalidArgument(path + " has a malformed section header table");
    }
    return Status::Ok();
  }
  bool InBounds(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }
  const Elf64_Ehdr& header() const { return *reinterpret_cast<const Elf64_Ehdr*>(data_); }
  Elf64_Shdr* sections() const {
    return reinterpret_cast<Elf64_Shdr*>(data_ + header().e_shoff);
  }
  unsigned char* at(uint64_t offset) const { return data_ + offset; }
  // A NUL-terminated string at `index` inside string table section `strtab`.
  bool String(const Elf64_Shdr& strtab, uint64_t index, std::string* out) const {
    if (index >= strtab.sh_size || !InBounds(strtab.sh_offset, strtab.sh_size)) return false;
    const char* s = reinterpret_cast<const char*>(data_ + strtab.sh_offset + index);
    size_t max = strtab.sh_size - index;
    size_t n = strnlen(s, max);
    if (n == max) return false;
    out->assign(s, n);
    return true;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

Status Malformed(const MappedFile& f, const std::string& what) {
  return InvalidArgument(f.path() + " is a malformed ELF file: " + what);
}

// Validates that section `s` and its linked string table lie inside the file.
Status CheckTable(const MappedFile& f, const Elf64_Shdr& s, size_t entsize, const char* name) {
  uint16_t shnum = f.header().e_shnum;
  if (s.sh_link >= shnum || !f.InBounds(s.sh_offset, s.sh_size) || s.sh_size % entsize != 0) {
    return Malformed(f, std::string("bad ") + name + " section");
  }
  const Elf64_Shdr& strtab = f.sections()[s.sh_link];
  if (!f.InBounds(strtab.sh_offset, strtab.sh_size)) {
    return Malformed(f, std::string("bad string table for ") + name);
  }
  return Status::Ok();
}

void SplitPath(const std::string& s, std::vector<std::string>* out) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = s.find(':', start);
    if (colon == std::string::npos) colon = s.size();
    if (colon > start) out->push_back(s.substr(start, colon - start));
    start = colon + 1;
  }
}

}  // namespace

StatusOr<ElfDynamicInfo> ReadElfDynamicInfo(const std::string& path) {
  MappedFile f;
  MANYPY_RETURN_IF_ERROR(f.Open(path, /*writable=*/false));
  ElfDynamicInfo info;
  bool saw_dynamic = false;
  std::string runpath, rpath;
  for (uint16_t i = 0; i < f.header().e_shnum; ++i) {
    const Elf64_Shdr& s = f.sections()[i];
    if (s.sh_type == SHT_DYNAMIC) {
      MANYPY_RETURN_IF_ERROR(CheckTable(f, s, sizeof(Elf64_Dyn), "dynamic"));
      saw_dynamic = true;
      const Elf64_Shdr& strtab = f.sections()[s.sh_link];
      const auto* dyn = reinterpret_cast<const Elf64_Dyn*>(f.at(s.sh_offset));
      for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Dyn) && dyn[k].d_tag != DT_NULL; ++k) {
        std::string value;
        int64_t tag = dyn[k].d_tag;
        if (tag != DT_NEEDED && tag != DT_SONAME && tag != DT_RUNPATH && tag != DT_RPATH) continue;
        if (!f.String(strtab, dyn[k].d_un.d_val, &value)) return Malformed(f, "bad dynamic string");
        if (tag == DT_NEEDED) info.needed.push_back(value);
        if (tag == DT_SONAME) info.soname = value;
        if (tag == DT_RUNPATH) runpath = value;
        if (tag == DT_RPATH) rpath = value;
      }
    } else if (s.sh_type == SHT_DYNSYM) {
      MANYPY_RETURN_IF_ERROR(CheckTable(f, s, sizeof(Elf64_Sym), "dynsym"));
      const Elf64_Shdr& strtab = f.sections()[s.sh_link];
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(f.at(s.sh_offset));
      for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Sym) && !info.references_python; ++k) {
        if (syms[k].st_shndx != SHN_UNDEF || syms[k].st_name == 0) continue;
        std::string name;
        if (!f.String(strtab, syms[k].st_name, &name)) return Malformed(f, "bad symbol name");
        info.references_python = name.rfind("Py", 0) == 0 || name.rfind("_Py", 0) == 0;
      }
    }
  }
  if (!saw_dynamic) return InvalidArgument(path + " is not a dynamically linked ELF object");
  // The dynamic linker ignores DT_RPATH when DT_RUNPATH is present.
  info.has_rpath_tag = runpath.empty() && !rpath.empty();
  SplitPath(runpath.empty() ? rpath : runpath, &info.runpath);
  return info;
}

StatusOr<int> RewriteGnuUniqueToGlobal(const std::string& path) {
  MappedFile f;
  MANYPY_RETURN_IF_ERROR(f.Open(path, /*writable=*/true));
  int changed = 0;
  for (uint16_t i = 0; i < f.header().e_shnum; ++i) {
    Elf64_Shdr& s = f.sections()[i];
    if (s.sh_type != SHT_DYNSYM && s.sh_type != SHT_SYMTAB) continue;
    MANYPY_RETURN_IF_ERROR(CheckTable(f, s, sizeof(Elf64_Sym), "symbol"));
    auto* syms = reinterpret_cast<Elf64_Sym*>(f.at(s.sh_offset));
    for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); ++k) {
      if (ELF64_ST_BIND(syms[k].st_info) == STB_GNU_UNIQUE) {
        syms[k].st_info = ELF64_ST_INFO(STB_GLOBAL, ELF64_ST_TYPE(syms[k].st_info));
        ++changed;
      }
    }
  }
  return changed;
}

}  // namespace manypy
