<?xml version="1.0" encoding="UTF-8"?>
<!--
  Renders sitemapd's sitemap index and pages as readable tables in a browser.
  Crawlers ignore it; the documents stay valid against the sitemaps.org schemas.
  XSLT 1.0, the only version browsers implement.
-->
<xsl:stylesheet version="1.0"
    xmlns:xsl="http://www.w3.org/1999/XSL/Transform"
    xmlns:s="http://www.sitemaps.org/schemas/sitemap/0.9"
    xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
    xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"
    xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"
    xmlns:xhtml="http://www.w3.org/1999/xhtml"
    exclude-result-prefixes="s image video news xhtml">
  <xsl:output method="html" encoding="UTF-8" indent="yes" doctype-system="about:legacy-compat"/>

  <xsl:template match="/">
    <html lang="en">
      <head>
        <meta charset="utf-8"/>
        <meta name="viewport" content="width=device-width, initial-scale=1"/>
        <meta name="robots" content="noindex"/>
        <title>
          <xsl:choose>
            <xsl:when test="s:sitemapindex">Sitemap index</xsl:when>
            <xsl:otherwise>Sitemap</xsl:otherwise>
          </xsl:choose>
        </title>
        <style>
          body { font: 15px/1.5 system-ui, sans-serif; color: #1d1d1f; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; }
          h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
          p.summary { color: #555; margin: 0 0 1.25rem; }
          table { border-collapse: collapse; width: 100%; }
          th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #e5e5e5; vertical-align: top; }
          th { background: #f5f5f7; font-weight: 600; position: sticky; top: 0; }
          td.n { color: #888; width: 3rem; }
          td.url { word-break: break-all; }
          td.count, th.count { text-align: right; white-space: nowrap; }
          td.date { white-space: nowrap; }
          a { color: #0050c8; text-decoration: none; }
          a:hover { text-decoration: underline; }
        </style>
      </head>
      <body>
        <xsl:apply-templates/>
      </body>
    </html>
  </xsl:template>

  <xsl:template match="s:sitemapindex">
    <h1>Sitemap index</h1>
    <p class="summary"><xsl:value-of select="count(s:sitemap)"/> sitemaps · <a href="sitemaps.html">HTML view</a> (URL counts, sizes, a finder; no XSLT needed)</p>
    <table>
      <thead><tr><th>#</th><th>Sitemap</th><th>Last modified</th></tr></thead>
      <tbody>
        <xsl:for-each select="s:sitemap">
          <!-- Link to the readable .xml form of each .xml.gz file. -->
          <xsl:variable name="xml" select="substring(s:loc, 1, string-length(s:loc) - 3)"/>
          <tr>
            <td class="n"><xsl:value-of select="position()"/></td>
            <td class="url"><a href="{$xml}"><xsl:value-of select="s:loc"/></a></td>
            <td class="date"><xsl:call-template name="datetime"><xsl:with-param name="value" select="s:lastmod"/></xsl:call-template></td>
          </tr>
        </xsl:for-each>
      </tbody>
    </table>
  </xsl:template>

  <xsl:template match="s:urlset">
    <xsl:choose>
      <!-- Only news sitemaps declare the news namespace, empty ones too. -->
      <xsl:when test="namespace::*[. = 'http://www.google.com/schemas/sitemap-news/0.9']">
        <xsl:call-template name="news"/>
      </xsl:when>
      <xsl:otherwise>
        <xsl:call-template name="page"/>
      </xsl:otherwise>
    </xsl:choose>
  </xsl:template>

  <!-- A page: each URL with its fields and how many images, videos and
       hreflang alternates it carries. -->
  <xsl:template name="page">
    <h1>Sitemap</h1>
    <p class="summary">
      <xsl:value-of select="concat(count(s:url), ' URLs · ', count(s:url/image:image), ' images · ',
                                   count(s:url/video:video), ' videos · ', count(s:url/xhtml:link), ' alternates · ')"/>
      <a href="sitemap_index.xml">sitemap index</a> · <a href="sitemaps.html">HTML view</a>
    </p>
    <table>
      <thead><tr><th>#</th><th>URL</th><th>Last modified</th><th>Change frequency</th><th>Priority</th><th class="count">Images</th><th class="count">Videos</th><th class="count">Alternates</th></tr></thead>
      <tbody>
        <xsl:for-each select="s:url">
          <tr>
            <td class="n"><xsl:value-of select="position()"/></td>
            <td class="url"><a href="{s:loc}"><xsl:value-of select="s:loc"/></a></td>
            <td class="date"><xsl:call-template name="datetime"><xsl:with-param name="value" select="s:lastmod"/></xsl:call-template></td>
            <td><xsl:value-of select="s:changefreq"/></td>
            <td><xsl:value-of select="s:priority"/></td>
            <td class="count"><xsl:value-of select="count(image:image)"/></td>
            <td class="count"><xsl:value-of select="count(video:video)"/></td>
            <td class="count"><xsl:value-of select="count(xhtml:link)"/></td>
          </tr>
        </xsl:for-each>
      </tbody>
    </table>
  </xsl:template>

  <!-- A news sitemap: the articles of the last 48 hours, newest first. -->
  <xsl:template name="news">
    <h1>News sitemap</h1>
    <p class="summary"><xsl:value-of select="count(s:url)"/> articles · <a href="sitemap_index.xml">sitemap index</a> · <a href="sitemaps.html">HTML view</a></p>
    <table>
      <thead><tr><th>#</th><th>URL</th><th>Title</th><th>Publication</th><th>Language</th><th>Published</th></tr></thead>
      <tbody>
        <xsl:for-each select="s:url">
          <tr>
            <td class="n"><xsl:value-of select="position()"/></td>
            <td class="url"><a href="{s:loc}"><xsl:value-of select="s:loc"/></a></td>
            <td><xsl:value-of select="news:news/news:title"/></td>
            <td><xsl:value-of select="news:news/news:publication/news:name"/></td>
            <td><xsl:value-of select="news:news/news:publication/news:language"/></td>
            <td class="date"><xsl:value-of select="news:news/news:publication_date"/></td>
          </tr>
        </xsl:for-each>
      </tbody>
    </table>
  </xsl:template>

  <!-- 2026-11-21T09:30:00+00:00 as "2026-11-21 09:30:00 UTC" -->
  <xsl:template name="datetime">
    <xsl:param name="value"/>
    <xsl:if test="$value">
      <xsl:value-of select="concat(substring($value, 1, 10), ' ', substring($value, 12, 8), ' UTC')"/>
    </xsl:if>
  </xsl:template>
</xsl:stylesheet>
